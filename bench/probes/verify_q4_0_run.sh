#!/usr/bin/env bash
# One device call: bench/verify.py's Llama-3.1-8B q4_0 plan (128k, one sequence, every layer) at
# the current kernel, for the bundled row.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/verify2"
timeout ${LIMIT:-150} python3 bench/verify.py --start 2 --stop 3 --out "$OUT/verify2" 2>&1 \
  | grep -v Warning | head -6
