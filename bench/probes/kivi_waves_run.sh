#!/usr/bin/env bash
# One device call: KIVI decode's split at whole waves of 8 to 24 programs a multiprocessor
# (decode(programs_per_sm=P): floor(P × 132 / rows) splits) against its default (one wave of
# 12 for kivi2, of 8 for kivi4 over more than 8 rows), with the registers of each launch, to
# learn how many kivi4 programs reside.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 520 python3 bench/kivi_check.py --out "$OUT" --no-check \
  --shapes 8x131072,8x32768,16x131072,16x32768,4x131072,64x32768 \
  --configs 1/2/0/0/1/8,1/2/0/0/1/10,1/2/0/0/1/12,1/2/0/0/1/16,1/2/0/0/1/20,1/2/0/0/1/24 \
  2>&1 | grep -v Warning | cut -c1-600
ls "$OUT"
