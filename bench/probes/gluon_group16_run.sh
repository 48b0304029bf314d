#!/usr/bin/env bash
# One device call: the Gluon kernel's 16-column forms (groups of 9-16 query heads a KV head,
# which decode leaves to decode_split_kernel) against the split kernel at 64/4 heads (a group
# of 16), 8 and 12 programs a multiprocessor, for q4_0, nvfp4, tbq4 and tbq3
# (bench/probes/gluon_nvfp4.py --heads ${HEADS:-64/4/128} --no-check; each into its own folder). HEADS
# takes other heads (96/8/128: a group of 12), SHAPES other shapes.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for fmt in ${FORMATS:-q4_0 nvfp4 tbq4 tbq3}; do
  mkdir -p "$OUT/$fmt"
  timeout 140 python3 bench/probes/gluon_nvfp4.py --format "$fmt" --out "$OUT/$fmt" --no-check \
    --heads 64/4/128 --per-sm 8,12 --shapes ${SHAPES:-1x32768,1x131072,4x32768,8x131072} \
    2>&1 | grep -v Warn | cut -c1-600
done
ls -R "$OUT"
