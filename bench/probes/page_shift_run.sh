#!/usr/bin/env bash
# One device call: the Gluon kernel finding each tile's page by a shift against a division
# (bench/probes/page_shift.py, three passes in turns), then q8_0 at B=1 128k at one wave of 4, 5
# and 6 programs a multiprocessor (bench/probes/gluon_waves.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 380 python3 bench/probes/page_shift.py --out "$OUT" 2>&1 | grep -v Warn
timeout 120 python3 bench/probes/gluon_waves.py --out "$OUT" --name q8_0-few.json \
  --formats q8_0 --waves 1 --resident 4,5,6,8 --shapes 1x131072,1x196608 2>&1 \
  | grep -v Warning | tail -4
ls "$OUT"
