#!/usr/bin/env bash
# One device call: the decode benchmark for q4_0 (its fp16 SDPA and read bandwidth in the same
# run), then q8_0's fixed cost at batch 1 at 6, 7 and 8 programs a multiprocessor
# (bench/probes/fixed_cost.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 330 python3 bench/decode.py --formats q4_0 --out "$OUT/decode" 2>&1 | grep -v Warn | tail -25
timeout 200 python3 bench/probes/fixed_cost.py --formats q8_0 --per-sm 6,7 \
  --tokens 32768,65536,131072,262144,524288 --out "$OUT/fixed" 2>&1 | grep -v Warn
ls -R "$OUT"
