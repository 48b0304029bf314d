#!/usr/bin/env bash
# One device call: q8_0's Gluon kernel at one wave of 4 programs a multiprocessor (one a
# scheduler) against 6 and 8 over more rows and tokens than q8_0_few_run.sh, and q4_0 at 4 and
# 8 against its 12 (bench/probes/gluon_waves.py, two rounds in alternating order).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/probes/gluon_waves.py --out "$OUT" --name q8_0-four.json \
  --formats q8_0 --waves 1 --resident 4,6,8 --rounds 2 \
  --shapes 1x524288,1x1048576,4x65536,4x131072,8x32768,8x131072,16x32768 2>&1 \
  | grep -v Warning | tail -8
timeout 100 python3 bench/probes/gluon_waves.py --out "$OUT" --name q4_0-four.json \
  --formats q4_0 --waves 1 --resident 4,8,12 --rounds 2 --shapes 1x131072,8x32768 2>&1 \
  | grep -v Warning | tail -3
ls "$OUT"
