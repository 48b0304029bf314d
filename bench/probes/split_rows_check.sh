#!/usr/bin/env bash
# One device call: fp8_pth's and nvfp4's v52 split over 96 to 512 rows (one wave rounded down)
# against the counts of the rule before it (rounded up) and of two whole waves.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 330 python3 bench/split_check.py --out "$OUT" --formats fp8_pth,nvfp4 \
  --shapes 12x131072,16x131072,24x32768,32x32768,48x32768,64x32768 \
  --splits 5,6,8,9,11,16,17,22,33 2>&1 | grep -v Warning | tail -12
ls "$OUT"
