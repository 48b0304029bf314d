#!/usr/bin/env bash
# One device call after ROTATED_TILES (tbq3 and tbq4 in 16-token one-warp programs capped at
# 128 registers, 16 a multiprocessor, up to 64 sequence-head rows): the decode benchmark for
# tbq4 and tbq3 (every shape of bench/decode.py) and the launch tables' check.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== decode tbq4,tbq3"
timeout 330 python3 bench/decode.py --formats tbq4,tbq3 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^tbq\|correct\|bytes_per_s"
echo "== launch check"
timeout 150 python3 bench/launch_check.py --workers 12 --out "$OUT" 2>&1 | tail -4
