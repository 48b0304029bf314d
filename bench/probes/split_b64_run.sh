#!/usr/bin/env bash
# One device call: the split kernel's split at B=64 32k (512 sequence-head rows), where the
# default (5 splits a sequence, 2,560 programs) makes more than one wave (1.21 at 16 programs a
# multiprocessor, the swapped formats' launch; 2.4 at fp8_pth's 8), against 2, 3 and 4.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/split_check.py --out "$OUT" --formats tbq4,tbq3,nvfp4,fp8_pth \
  --shapes 64x32768 --splits 2,3,4 2>&1 | grep -v Warning | tail -8
ls "$OUT"
