#!/usr/bin/env bash
# One device call: f16's and bf16's split over few rows, where f16 B=1 32k read at 79.7% of the
# bandwidth (decode-h200-v35.md): the default (64 splits at B=1 32k, 128k and 64k; 32 at B=2
# 32k) against fixed counts, with the split kernel's registers.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/split_check.py --out "$OUT" --formats f16,bf16 --shapes \
1x32768@16/24/32/44/88/128,2x32768@16/22/44/66,1x65536@32/44/88/128,1x131072@32/44/88/132 \
  2>&1 | grep -v Warning | cut -c1-400
ls "$OUT"
