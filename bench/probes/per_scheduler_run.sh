#!/usr/bin/env bash
# One device call: the Gluon kernel at whole programs a scheduler over more shapes: q4_0 at one
# wave of 8 programs a multiprocessor (two a scheduler) against its 12, q8_0 at 4 (one) against
# its 8 over many rows (bench/probes/gluon_waves.py, two rounds in alternating order).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 330 python3 bench/probes/gluon_waves.py --out "$OUT" --name q4_0-eight.json \
  --formats q4_0 --waves 1 --resident 8,12 --rounds 2 \
  --shapes 1x65536,1x262144,1x1048576,2x131072,4x32768,4x131072,8x131072,16x131072,64x4096,64x32768 \
  2>&1 | grep -v Warning | tail -10
timeout 200 python3 bench/probes/gluon_waves.py --out "$OUT" --name q8_0-four-many.json \
  --formats q8_0 --waves 1 --resident 4,8 --rounds 2 --shapes 32x32768,64x4096,64x32768,16x131072 \
  2>&1 | grep -v Warning | tail -4
ls "$OUT"
