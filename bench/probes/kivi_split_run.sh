#!/usr/bin/env bash
# One device call: KIVI decode's tokens a program (split) against its default (at most
# KIVI_SPLIT = 1024 tokens, which makes 5 to 16 waves of programs at B=8 128k, B=1 1M and
# B=64 32k, and 1.3 waves at B=8 32k; Nsight Compute: 5.17 waves for kivi2 at B=8 128k).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 500 python3 bench/kivi_check.py --out "$OUT" --no-check \
  --shapes 8x131072,8x32768,1x1048576,64x32768 \
  --configs 1/2/1408,1/2/2048,1/2/4096,1/2/5504,1/2/8192 2>&1 | grep -v Warning | tail -12
ls "$OUT"
