#!/usr/bin/env bash
# One device call: one stage on 512-wide heads (Gemma 4's global layers: 32 query heads over 4
# KV heads × 512) against WIDE_LAUNCH[512]'s two (16 tokens, 2 warps), every format, B=1 128k
# and B=8 32k; then the candidate launches checked against the reference on the GPU
# (bench/launch_check.py --launches) in the same call.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
timeout 110 python3 bench/decode_sweep.py --heads 32/4/512 \
    --formats f16,fp8_pth,q8_0,q4_0,tbq4,tbq3,nvfp4 --no-split --shapes 1x131072,8x32768 \
    --configs 16/2/1,32/2/1,16/4/1 --out "$OUT/w512" 2>&1 | grep -v Warn | grep "best\|SDPA"
timeout 70 python3 bench/launch_check.py --workers 12 --heads 32/4/512,8/2/512 \
    --launches 16/2/1,32/2/1,16/4/1 --out "$OUT/lc" 2>&1 | grep "FAILED\|cases"
cat "$OUT/gpu.log"
