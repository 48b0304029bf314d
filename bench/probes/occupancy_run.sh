#!/usr/bin/env bash
# Occupancy of the one-warp decode programs at B=1 (fewer than MANY_ROWS rows, where the
# launch sets programs a multiprocessor): each format's default launch with registers capped
# so that 12 or 16 programs fit a multiprocessor (168, 128 a thread) and that many programs
# (bench/probes/int_keys.py, both paths the default; registers and spills of each compile).
# The first run (occupancy-q8_0-h200.json, occupancy-q4_0-h200.json) also took B=8 and 96.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
cfgs=0/0/0/0/0/8,0/0/0/0/0/12,0/0/0/0/168/12,0/0/0/0/160/12,0/0/0/0/200/10,0/0/0/0/0/10,0/0/0/0/128/16
timeout 520 python3 bench/probes/int_keys.py --formats q8_0,q4_0,nvfp4,tbq3,fp8_pth \
  --base "" --variant "" --shapes 1x32768,1x65536,1x131072,1x262144,1x1048576 \
  --configs "$cfgs" --out "$OUT" 2>&1 | grep "^q\|^nv\|^tb\|^fp\|^read\|Error"
