#!/usr/bin/env bash
# One device call: q4_0's and nvfp4's Gluon forms at 8 programs a multiprocessor with PIPE in
# three stages (decode's: one tile copied ahead of the scores) and in four (two ahead), against
# 12 a multiprocessor (q4_0 without PIPE, nvfp4 with) and the split kernel, two rounds in turns
# (bench/probes/gluon_nvfp4.py --no-check; each format into its own folder).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for f in q4_0 nvfp4; do
  mkdir -p "$OUT/$f"
  v=8p,8p4,12
  [ "$f" = nvfp4 ] && v=8p,8p4,12p
  timeout 200 python3 bench/probes/gluon_nvfp4.py --format "$f" --out "$OUT/$f" --no-check \
    --per-sm "$v" --shapes ${SHAPES:-1x131072,4x32768,8x131072} --rounds 2 2>&1 | grep -v Warn \
    | cut -c1-400
done
