#!/usr/bin/env bash
# One device call for kernel v78 (KIVI appends in one launch, flush_parts; q4_0's append by
# one integer max). On an H200, or with DECODE=1: the decode benchmark first (every format, the
# README's table, or FORMATS; LIMIT seconds), then KIVI's short appends by warps and parts
# (bench/probes/kivi_short_append.py) and, unless BATCHED=0, v77's probe
# (bench/probes/kivi_batched_append.py) into $OUT/k. On another card only with ANY_CARD=1.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || [ "${DECODE:-0}" = 1 ]; then
  [ "${ANY_CARD:-0}" = 1 ] || nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
    || { echo "not an H200"; exit 3; }
  timeout "${LIMIT:-400}" python3 bench/decode.py ${FORMATS:+--formats "$FORMATS"} --out "$OUT" \
    2>&1 | grep -v Warning \
    | grep "^[a-z0-9_]* *B=\|correctness\|identical\|TB/s\|Error\|error" | cut -c1-400
elif [ "${ANY_CARD:-0}" != 1 ]; then
  echo "not an H200"; exit 3
fi
timeout 90 python3 bench/probes/kivi_short_append.py --rounds 2 --out "$OUT" 2>&1 \
  | grep -v Warn | tail -6
[ "${BATCHED:-1}" = 0 ] && exit 0
mkdir -p "$OUT/k"
timeout 100 python3 bench/probes/kivi_batched_append.py --rounds 2 --out "$OUT/k" 2>&1 \
  | grep -v Warn | tail -10
