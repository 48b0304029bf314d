#!/usr/bin/env bash
# One device call: the decode benchmark for q8_0 under v54 (6 Gluon programs a multiprocessor
# where a wave of 8 makes splits of at most 1,024 tokens), its fp16 SDPA and read bandwidth in
# the same run.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 400 python3 bench/decode.py --formats q8_0 --out "$OUT" 2>&1 | grep -v Warn | tail -12
ls "$OUT"
