#!/usr/bin/env bash
# Occupancy of the one-warp decode programs: q8_0 and q4_0 under their default launch with
# registers capped (128, 96 a thread) and more programs a multiprocessor (12, 16, 24), B=1
# and B=8 at 128k, B=1 at 32k (bench/probes/int_keys.py, both paths the default).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for spec in q8_0:4 q4_0:8; do
  f=${spec%%:*}; p=${spec##*:}
  cfgs=""
  for c in 0/8 0/12 0/16 128/12 128/16 128/24 96/16 96/24 168/12; do cfgs="$cfgs,32/1/3/$p/$c"; done
  cfgs="${cfgs#,},16/1/3/$p/0/16,16/1/3/$p/128/24"
  timeout 250 python3 bench/probes/int_keys.py --formats $f --base "" --variant "" \
    --shapes 1x131072,8x131072,1x32768 --configs "$cfgs" --out "$OUT/$f" 2>&1 \
    | grep "^q\|^read\|Error"
done
