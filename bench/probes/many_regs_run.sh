#!/usr/bin/env bash
# One device call: fp8_pth (243 registers, 8 programs reside) and nvfp4 (198 from 256 rows; 128
# under it) with registers capped so that 12 or 16 programs fit a multiprocessor, at their
# default split for that many (split_check --launches), over 64 to 512 rows.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/split_check.py --out "$OUT" --formats fp8_pth,nvfp4 --splits "" \
  --shapes 8x131072,32x32768,48x32768,64x32768,56x131072 --launches 168/12,128/16 2>&1 \
  | grep -v Warning | cut -c1-400
ls "$OUT"
