#!/usr/bin/env bash
# One device call: fp8_pth's and nvfp4's split (one wave of their programs, rounded up) against
# fixed split counts over 96 to 384 (sequence, KV head) rows, where the rounding can leave a
# second wave of a few programs (as it did for the rotated formats, v50, and the Gluon kernel,
# v51).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 540 python3 bench/split_check.py --out "$OUT" --formats fp8_pth,nvfp4 \
  --shapes 12x131072,16x131072,24x32768,32x32768,48x32768 \
  --splits 2,3,4,5,6,8,11,12,16,17,22,33 2>&1 | grep -v Warning | tail -12
ls "$OUT"
