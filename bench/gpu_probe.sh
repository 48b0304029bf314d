#!/usr/bin/env bash
# A short device call: the quick decode rows of every format (with the GPU correctness checks)
# on GPU 0 and the split sweep on GPU 1, to check a kernel change before the full run.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
(CUDA_VISIBLE_DEVICES=0 timeout 400 python3 bench/decode.py --quick --out "$OUT/quick") \
  > "$OUT/quick.log" 2>&1 &
(CUDA_VISIBLE_DEVICES=1 timeout 400 python3 bench/split_check.py --out "$OUT/split") \
  > "$OUT/split.log" 2>&1 &
wait
cat "$OUT/gpu.log"
grep -v "^{'torch'\|^{\"env" "$OUT/quick.log" | cut -c1-1500 | tail -n 30
tail -n 20 "$OUT/split.log"
