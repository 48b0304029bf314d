#!/usr/bin/env bash
# One device call: where kivi4's capped launch (12 programs a multiprocessor, 168 registers a
# thread; decode's at up to KIVI4_CAP_ROWS = 8 sequence-head rows since v48) pays, at 2 and 4
# sequences (16 and 32 rows), against decode's default there (8 programs, uncapped).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/kivi_check.py --out "$OUT" --no-check \
  --shapes 2x32768,2x131072,4x32768,4x131072,1x131072 \
  --configs 1/2/0/0/1/0/0/0,1/2/0/0/1/12/168/0 2>&1 | grep -v Warning | tail -24
ls "$OUT"
