#!/usr/bin/env bash
# One device call: the Gluon kernel's tbq3 form, checked (decode's paged check forced at 4, 8
# and 16 query heads a KV head, pages of 32, 64 and 96) and timed against decode_split_kernel
# at 8 programs a multiprocessor (capped at 232 registers) and 12 (capped at 168)
# (bench/probes/gluon_nvfp4.py --format tbq3).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/check"
timeout 150 python3 bench/probes/gluon_nvfp4.py --format tbq3 --out "$OUT/check" --per-sm 8p \
  --shapes 1x32768 --rounds 1 2>&1 | grep -v Warn | cut -c1-900
timeout 330 python3 bench/probes/gluon_nvfp4.py --format tbq3 --out "$OUT" --no-check \
  --per-sm 8p,12pc168 --shapes 1x8192,1x16384,1x32768,2x16384,1x131072,8x32768,8x131072,1x1048576 \
  2>&1 | grep -v Warn | cut -c1-700
ls -R "$OUT"
