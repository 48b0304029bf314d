#!/usr/bin/env bash
# One device call after q8_0's scores became an integer product (decode(int_keys=…)): the
# decode benchmark for f16 and q8_0 (every shape of bench/decode.py), the launch tables'
# check (every launch they choose against the torch reference), and bench/verify.py's plans
# with a q8_0 K cache at head_dim 128 (Llama-3.1-8B 32k × 4, Qwen3-8B q8_0/tbq3 128k, Gemma-3
# 27B 128k × 2, Nemotron-H 56B 64k × 2): bytes against the prediction and the step time.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== decode f16,q8_0"
timeout 300 python3 bench/decode.py --formats f16,q8_0 --out "$OUT" 2>&1 | grep -v Warning | tail -24
echo "== launch check"
timeout 200 python3 bench/launch_check.py --workers 12 --out "$OUT" 2>&1 | tail -6
echo "== verify q8_0 plans"
for i in 1 6 16 21; do
  timeout 90 python3 bench/verify.py --start $i --stop $((i + 1)) --out "$OUT/verify-$i" 2>&1 | tail -2
done
