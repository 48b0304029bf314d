#!/usr/bin/env bash
# One device call: kivi2's K_SUB in the KIVI Gluon kernel's other forms (the 16-column form at
# GQA 64/4, heads of 64 lanes at GQA 64/8), checked and timed in turns against V_AFTER alone.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/g16" "$OUT/l64"
timeout 130 python3 bench/probes/gluon_kivi.py --out "$OUT/g16" --format kivi2 \
  --heads 64/4/128 --groups 12,16 --shapes 1x131072,8x32768,8x131072 --launches 8c232vy,8c232vz \
  --rounds 3 2>&1 | grep -v Warn | cut -c1-1500
timeout 110 python3 bench/probes/gluon_kivi.py --out "$OUT/l64" --format kivi2 \
  --heads 64/8/64 --groups 4,8 --shapes 1x131072,8x32768,8x131072 --launches 12c168vy,12c168vz \
  --rounds 3 2>&1 | grep -v Warn | cut -c1-1500
ls -R "$OUT"
