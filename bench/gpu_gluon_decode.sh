#!/usr/bin/env bash
# One device call: the decode benchmark for q4_0 with decode's Gluon kernel in place (its GPU
# check forces it at pages of 32 and 64; each shape times decode's own choice and the split
# kernel's launches, the best kept).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 540 python3 bench/decode.py --formats q4_0 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^q4_0\|correctness\|TB/s\|Error\|error" | cut -c1-3000
ls "$OUT"
