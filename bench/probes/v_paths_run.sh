#!/usr/bin/env bash
# q8_0's V side under its read and unpack variants, the keys as integer products (the default):
# bytes instead of words, plain Triton arithmetic instead of PTX, both (bench/probes/int_keys.py
# with --base and --variant).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
for v in words_v=0 asm=0 asm=0,words_v=0; do
  echo "== $v"
  timeout 170 python3 bench/probes/int_keys.py --formats q8_0 --base "" --variant "$v" \
    --configs 32/1/3/4,64/1/2/4 --out "$OUT/${v//[=,]/_}" 2>&1 | grep "^q8_0\|check q8_0 q8_0"
done
