#!/usr/bin/env bash
# One device call: the decode benchmark for kivi2 once decode took the K_SUB form beside V_AFTER
# (the README's row), then bench/verify.py's Llama-3.1-70B kivi2 plan.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/kivi2" "$OUT/verify19"
timeout 280 python3 bench/decode.py --formats kivi2 --out "$OUT/kivi2" 2>&1 | grep -v Warning \
  | grep "^kivi\|correctness\|TB/s\|Error\|error" | cut -c1-600
timeout 100 python3 bench/verify.py --start 19 --stop 20 --out "$OUT/verify19" 2>&1 \
  | grep -v Warning | head -4
ls -R "$OUT"
