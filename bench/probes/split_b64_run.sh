#!/usr/bin/env bash
# One device call: the decode split at B=64 32k (512 sequence-head rows), where the default
# makes more than one wave of programs (q4_0 and q8_0's Gluon kernel 4 or 5 splits at 12
# resident programs a multiprocessor, the swapped split kernel's 5 at 16), against 2, 3 and 4
# splits a sequence (3: one wave of 12 a multiprocessor).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/split_check.py --out "$OUT" --formats q4_0,q8_0,tbq4,nvfp4 \
  --shapes 64x32768 --splits 2,3,4 2>&1 | grep -v Warning | tail -8
ls "$OUT"
