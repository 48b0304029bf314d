#!/usr/bin/env bash
# One device call: the fixed-cost probe at 6, 8 and 12 programs a multiprocessor (32k, 128k and
# 1M tokens), then KIVI's swapped products against its default launch (bench/kivi_check.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 250 python3 bench/probes/fixed_cost.py --per-sm 6,8,12 --tokens 32768,131072,1048576 \
  --out "$OUT" 2>&1 | grep -v Warning | tail -24
timeout 300 python3 bench/kivi_check.py --out "$OUT" --dims 128 \
  --shapes 1x131072,8x131072,8x32768 \
  --configs 1/2/0/0/1/0/0/1,1/2/0/0/1/12/0/1,1/2/0/0/1/16/0/1,1/3/0/0/1/0/0/1,1/2/0/0/1/12/0/2 \
  2>&1 | grep -v Warning | tail -12
