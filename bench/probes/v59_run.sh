#!/usr/bin/env bash
# One device call: the decode benchmark for tbq4 under v59 (the Gluon kernel's tbq4 form),
# its fp16 SDPA, read bandwidth and decode's GPU checks (the Gluon kernel forced for q4_0, q8_0,
# nvfp4 and tbq4) in the same run.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 400 python3 bench/decode.py --formats tbq4 --out "$OUT/decode" 2>&1 | grep -v Warn \
  | grep "^tbq4\|read_bytes\|rror" | cut -c1-300
ls -R "$OUT"
