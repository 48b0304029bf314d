#!/usr/bin/env bash
# A short device call on a two-GPU machine, to check a kernel change before the full run:
# bench/words_check.py (word-wise against byte-wise plane reads) for the formats in $WORDS_A on
# GPU 0 and $WORDS_B on GPU 1, and the append sweep of $APPEND (if set) on GPU 1 after it.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
(CUDA_VISIBLE_DEVICES=0 timeout 400 python3 bench/words_check.py \
  --formats "${WORDS_A:-fp8_pth,q8_0,q4_0}" --out "$OUT/a") > "$OUT/a.log" 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1
  WB=${WORDS_B-tbq4,nvfp4}  # set but empty: no words check on GPU 1
  [ -n "$WB" ] && timeout 400 python3 bench/words_check.py --formats "$WB" --out "$OUT/b"
  [ -n "${APPEND:-}" ] && timeout 300 python3 bench/append_sweep.py --formats "$APPEND" --out "$OUT/b"
) > "$OUT/b.log" 2>&1 &
wait
cat "$OUT/gpu.log" "$OUT/a.log" "$OUT/b.log" | cut -c1-400 | tail -n 60
