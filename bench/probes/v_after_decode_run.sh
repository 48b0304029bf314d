#!/usr/bin/env bash
# One device call: the decode benchmark for kivi2 and kivi4 once decode took the KIVI Gluon
# kernel's V_AFTER form (the README's rows).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for fmt in kivi2 kivi4; do
  mkdir -p "$OUT/$fmt"
  timeout 280 python3 bench/decode.py --formats $fmt --out "$OUT/$fmt" 2>&1 | grep -v Warning \
    | grep "^kivi\|correctness\|TB/s\|Error\|error" | cut -c1-600
done
ls -R "$OUT"
