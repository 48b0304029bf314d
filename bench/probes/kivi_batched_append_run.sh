#!/usr/bin/env bash
# One device call: KIVI's appends of several sequences in one launch (v77) against a launch a
# sequence, and a group's channel blocks shared among programs (bench/probes/
# kivi_batched_append.py, ROUNDS rounds), then the decode benchmark for FORMATS (every format
# by default: the README's table; LIMIT=0: none). ANY_CARD=1: on a card other than an H200
# too.
set -u
export PYTHONUNBUFFERED=1
[ "${ANY_CARD:-0}" = 1 ] || nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200"; exit 3; }
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 150 python3 bench/probes/kivi_batched_append.py --rounds "${ROUNDS:-2}" --out "$OUT" \
    2>&1 | grep -v Warning | tail -12
[ "${LIMIT:-420}" = 0 ] && exit 0
timeout "${LIMIT:-420}" python3 bench/decode.py ${FORMATS:+--formats "$FORMATS"} --out "$OUT" \
    2>&1 | grep -v Warning | grep "^[a-z0-9_]* *B=\|correctness\|identical\|TB/s\|Error\|error" | cut -c1-400
