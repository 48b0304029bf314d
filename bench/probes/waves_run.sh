#!/usr/bin/env bash
# One device call: the decode benchmark for tbq4 and tbq3 under v50's split (the README's
# rows), v50's split counts not yet timed (B=16 128k: 64; B=64 32k and 128k: 16) beside their
# neighbours, and q4_0's and q8_0's Gluon kernel at whole waves of programs.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 240 python3 bench/decode.py --formats tbq4,tbq3 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^tbq\|Error\|error" | cut -c1-300
timeout 120 python3 bench/split_check.py --out "$OUT" --formats tbq4,tbq3 \
  --shapes 16x131072,64x32768,64x131072 --splits 5,8,17,32 2>&1 | grep -v Warning | tail -6
timeout 200 python3 bench/probes/gluon_waves.py --out "$OUT" 2>&1 | grep -v Warning | tail -8
ls "$OUT"
