#!/usr/bin/env bash
# One device call: the decode benchmark for the formats given (default nvfp4), their fp16 SDPA,
# read bandwidth and decode's GPU checks (the Gluon kernel forced for q4_0, q8_0, nvfp4, tbq4
# and tbq3) in the same run: `bash bench/probes/decode_run.sh tbq4` (TIMEOUT: seconds for the
# benchmark, 400 by default).
set -u
export PYTHONUNBUFFERED=1
formats=${1:-nvfp4}
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout ${TIMEOUT:-400} python3 bench/decode.py --formats "$formats" --out "$OUT/decode" 2>&1 \
  | grep -v Warn | grep "^${formats//,/\\|^}\|read_bytes\|rror" | cut -c1-300
ls -R "$OUT"
