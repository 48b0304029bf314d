#!/usr/bin/env bash
# One device call: the merge in one round trip against two (bench/probes/merge_pass.py), then
# the decode benchmark for q8_0 and f16 under v54, their fp16 SDPA and read bandwidth in the
# same run.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 200 python3 bench/probes/merge_pass.py --out "$OUT" 2>&1 | grep -v Warn
timeout 330 python3 bench/decode.py --formats q8_0,f16 --out "$OUT/decode" 2>&1 | grep -v Warn \
  | grep "^q8_0\|^f16 \|read_bytes\|rror" | cut -c1-300
ls -R "$OUT"
