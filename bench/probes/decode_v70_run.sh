#!/usr/bin/env bash
# One device call: the decode benchmark for the formats the Gluon kernel's v68-v70 changes touch
# (FORMATS, default the 4-bit ones), as bench/decode.py runs it; with the card's log.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout ${LIMIT:-560} python3 bench/decode.py --formats "${FORMATS:-q4_0,nvfp4}" --out "$OUT" 2>&1 \
  | grep -v Warning | grep "^[a-z0-9_]* *B=\|correctness\|TB/s\|Error\|error" | cut -c1-600
