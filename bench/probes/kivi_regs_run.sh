#!/usr/bin/env bash
# One device call: kivi2's KIVI Gluon kernel as decode launches it since v67 (V_AFTER, K_SUB) at
# 12 programs a multiprocessor of 168 registers against 13 of 152, 14 of 144 and 16 of 128
# (spilling 40, 64 and 128 bytes under triton 3.6), timed in turns (bench/probes/gluon_kivi.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 220 python3 bench/probes/gluon_kivi.py --out "$OUT" --format kivi2 --no-check \
  --launches 12c168,13c152,14c144,16c128 --shapes 1x131072,8x131072,64x32768 --rounds 2 2>&1 \
  | grep -v Warn | cut -c1-900
ls "$OUT"
