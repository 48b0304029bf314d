#!/usr/bin/env bash
# One device call after q8_0's integer keys were extended to 256-wide heads: the probe at
# 24/4 × 256 with the new default against the float16 path, the launch tables' check, and
# bench/verify.py's Qwen3.5-27B q8_0 262k plan (its full-attention layers are 256 wide).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
echo "== probe 24/4/256"
timeout 100 python3 bench/probes/int_keys.py --heads 24/4/256 --formats q8_0 \
  --shapes 1x262144,8x32768,1x32768 --base int_keys=0 --variant "" --configs "" \
  --out "$OUT/probe" 2>&1 | grep "B=\|check"
echo "== launch check"
timeout 150 python3 bench/launch_check.py --workers 14 --out "$OUT" 2>&1 | tail -3
echo "== verify qwen3.5-27b q8_0"
timeout 80 python3 bench/verify.py --start 9 --stop 10 --out "$OUT/verify" 2>&1 | grep "^  |"
