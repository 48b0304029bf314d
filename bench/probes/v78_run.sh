#!/usr/bin/env bash
# One device call for kernel v78 (KIVI appends in one launch, flush_parts; q4_0's append by
# one integer max). On an H200: the whole decode benchmark first (the README's table; LIMIT
# seconds), then KIVI's short appends by warps and parts (bench/probes/kivi_short_append.py)
# and v77's probe (bench/probes/kivi_batched_append.py) into $OUT/k. On another card (ANY_CARD=1)
# the two probes alone.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout "${LIMIT:-400}" python3 bench/decode.py --out "$OUT" 2>&1 | grep -v Warning \
    | grep "^[a-z0-9_]* *B=\|correctness\|identical\|TB/s\|Error\|error" | cut -c1-400
elif [ "${ANY_CARD:-0}" != 1 ]; then
  echo "not an H200"; exit 3
fi
timeout 90 python3 bench/probes/kivi_short_append.py --rounds 2 --out "$OUT" 2>&1 \
  | grep -v Warn | tail -6
mkdir -p "$OUT/k"
timeout 100 python3 bench/probes/kivi_batched_append.py --rounds 2 --out "$OUT/k" 2>&1 \
  | grep -v Warn | tail -10
