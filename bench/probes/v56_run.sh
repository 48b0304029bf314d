#!/usr/bin/env bash
# One device call: decode's paged GPU check of the Gluon kernel under v56 (q4_0's launches over
# few rows take PIPE; pages of 32, 64 and 96 tokens), then the decode benchmark for q8_0 and
# q4_0 with their fp16 SDPA and read bandwidth in the same run.
set -u
export PYTHONUNBUFFERED=1
bash bench/probes/pipe_check_run.sh
timeout 400 python3 bench/decode.py --formats q8_0,q4_0 --out "$OUT/decode" 2>&1 | grep -v Warn \
  | grep "^q8_0\|^q4_0\|read_bytes\|rror" | cut -c1-300
ls -R "$OUT"
