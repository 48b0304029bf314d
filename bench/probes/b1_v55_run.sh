#!/usr/bin/env bash
# One device call: q8_0 and q4_0 at B=1 128k under v55 against fp16 SDPA, four rounds in turns
# (bench/probes/q8_0_b1.py), each into its own folder.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for fmt in q8_0 q4_0; do
  mkdir -p "$OUT/$fmt"
  timeout 120 python3 bench/probes/q8_0_b1.py --out "$OUT/$fmt" --format "$fmt" --rounds 4 2>&1 \
    | grep -v Warn
done
ls -R "$OUT"
