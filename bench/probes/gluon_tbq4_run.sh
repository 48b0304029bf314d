#!/usr/bin/env bash
# One device call: the Gluon kernel's tbq4 form, checked (decode's paged check forced at 4, 8
# and 16 query heads a KV head) and timed against decode_split_kernel at 8 and 12 programs a
# multiprocessor, capped at 168 registers and not (bench/probes/gluon_nvfp4.py --format tbq4).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/check"
timeout 150 python3 bench/probes/gluon_nvfp4.py --format tbq4 --out "$OUT/check" --per-sm 12p \
  --shapes 1x32768 --rounds 1 2>&1 | grep -v Warn | cut -c1-900
timeout 300 python3 bench/probes/gluon_nvfp4.py --format tbq4 --out "$OUT" --no-check \
  --per-sm 8p,8pu,12p,12pu --shapes 1x32768,1x131072,8x32768,8x131072,1x1048576 2>&1 \
  | grep -v Warn | cut -c1-700
ls -R "$OUT"
