#!/usr/bin/env bash
# One device call: KIVI's swapped form, decode's default since v46: more launches of it
# (bench/kivi_check.py: 128-token steps, two warps, 10 and 12 programs a multiprocessor, a
# register cap, eager rescaling; its GPU check at 128-, 96- and 64-wide heads), then the decode
# benchmark for kivi2 and kivi4 (the README's rows).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 200 python3 bench/kivi_check.py --out "$OUT" --dims 128,96,64 \
  --shapes 1x131072,8x131072 \
  --configs 1/2/0/128/1/0/0/1,2/2/0/0/1/0/0/1,1/2/0/0/1/10/0/1,1/2/0/0/1/12/168/1,1/2/0/0/0/0/0/1,1/2/0/0/1/0/0/2 \
  2>&1 | grep -v Warning | tail -12
timeout 380 python3 bench/decode.py --formats kivi2,kivi4 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^kivi\|correctness\|TB/s\|Error\|error" | cut -c1-2000
ls "$OUT"
