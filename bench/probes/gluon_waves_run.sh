#!/usr/bin/env bash
# One device call: the Gluon kernel's v51 split (one whole wave of the programs that reside:
# q4_0 12, q8_0 8 a multiprocessor) against the rule before it (one wave rounded up at 12 or
# 16) and two waves, over 16 to 512 rows; then the decode benchmark for q4_0 and q8_0.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/probes/gluon_waves.py --out "$OUT" --name gluon-waves-v51.json \
  --shapes 2x131072,4x32768,8x32768,12x131072,16x32768,24x32768,32x32768,32x131072,48x32768 \
  --waves 1,2 --resident 12,8 --ceil 12,16 2>&1 | grep -v Warning | tail -20
timeout 280 python3 bench/decode.py --formats q4_0,q8_0 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^q[48]_0\|Error\|error" | cut -c1-300
ls "$OUT"
