#!/usr/bin/env bash
# Launches for the formats that decode slowest (tbq3, tbq4, nvfp4): one-warp programs of 16,
# 32 and 64 tokens, 2 and 3 stages, 4 and 8 rows, with and without registers capped at 168
# (12 programs a multiprocessor) or 128 (16), at B=1 32k and 128k and B=8 128k
# (bench/probes/int_keys.py, both paths the default; a 0 field takes the default launch's).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
cfgs=0/0/0/0/0/0,32/1/3/4,32/1/2/4,32/1/3/8,64/1/2/8,16/1/3/4,32/1/3/4/168/12,32/1/2/4/168/12
cfgs=$cfgs,32/1/3/8/168/12,16/1/3/4/128/16,64/1/2/4/200/10,32/2/2/8,64/2/2/8
timeout 520 python3 bench/probes/int_keys.py --formats tbq3,tbq4,nvfp4 --base "" --variant "" \
  --shapes 1x131072,8x131072,1x32768 --configs "$cfgs" --out "$OUT" 2>&1 \
  | grep "^tb\|^nv\|^read\|Error"
