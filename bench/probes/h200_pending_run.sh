#!/usr/bin/env bash
# One device call, on an H200 only (it exits at once on another card): the decode benchmark
# for FORMATS (default q8_0,tbq3), v74's rows pending on an H200, and the large-group launches
# of v75-v76 on MiniMax-M3's index shape (64 query heads over one K-only head of 128, B=2
# 131,072 tokens): each format's default launch against its one-warp GQA launch.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200"; exit 3; }
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/index"
timeout 150 python3 bench/decode_sweep.py --no-split --formats q8_0,q4_0,fp8_pth,nvfp4,tbq3 \
    --shapes 2x131072 --heads 64/1/128/k --configs "0/0/0,32/1/3,64/1/2" --out "$OUT/index" \
    2>&1 | grep "^K \|^fp16" | cut -c1-200
timeout "${LIMIT:-300}" python3 bench/decode.py --formats "${FORMATS:-q8_0,tbq3}" --out "$OUT" \
    2>&1 | grep -v Warning | grep "^[a-z0-9_]* *B=\|correctness\|TB/s\|Error\|error" | cut -c1-600
