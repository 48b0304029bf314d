#!/usr/bin/env bash
# One device call: the decode benchmark for the formats the Gluon kernel takes (FORMATS, default
# q4_0; also q8_0). Its GPU check forces the kernel at
# pages of 32 and 64 (q4_0 and q8_0, q8_0 against the float16-query reference); each shape times
# decode's own choice and the split kernel's launches, the best kept.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 540 python3 bench/decode.py --formats "${FORMATS:-q4_0}" --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^q4_0\|^q8_0\|correctness\|TB/s\|Error\|error" | cut -c1-3000
ls "$OUT"
