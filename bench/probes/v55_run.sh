#!/usr/bin/env bash
# One device call: the decode benchmark for q8_0 and q4_0 under v55 (whole programs a
# scheduler over few rows), their fp16 SDPA and read bandwidth in the same run.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 400 python3 bench/decode.py --formats q8_0,q4_0 --out "$OUT/decode" 2>&1 | grep -v Warn \
  | grep "^q8_0\|^q4_0\|read_bytes\|rror" | cut -c1-300
ls -R "$OUT"
