#!/usr/bin/env bash
# The checks after a change to the rotated formats' decode (called by gpu_rownorm.sh and
# gpu_fold.sh, after bench/gpu_env.sh): the decode benchmark for tbq4 and tbq3, the launch
# tables' check against the reference, and the three bench/verify.py plans whose rotated heads
# are 128 lanes (Qwen3-8B tbq4 128k × 4, Qwen3-8B q8_0/tbq3 128k, Llama-4-Scout tbq4 1M).
set -u
echo "== decode tbq4, tbq3"
timeout 240 python3 bench/decode.py --formats tbq4,tbq3 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^tbq\|bytes_per_s"
echo "== launch check"
timeout 120 python3 bench/launch_check.py --workers 12 --out "$OUT" 2>&1 | tail -2
for plan in 5 6 22; do
  echo "== verify plan $plan"
  mkdir -p "$OUT/verify$plan"
  timeout 60 python3 bench/verify.py --start $plan --stop $((plan + 1)) --out "$OUT/verify$plan" \
    2>&1 | grep -v Warning | head -2
done
