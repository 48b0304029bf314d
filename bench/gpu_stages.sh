#!/usr/bin/env bash
# One device call: kernel v34 (q4_0, nvfp4 and tbq3 swapped in one-stage programs): the decode
# benchmark for those formats, then every launch the tables choose against the reference.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
timeout 200 python3 bench/decode.py --formats "${FORMATS:-q4_0,nvfp4,tbq3}" --out "$OUT/decode" 2>&1 \
    | grep "B=" | tail -30
timeout 100 python3 bench/launch_check.py --workers 12 --out "$OUT/lc" 2>&1 | tail -2
cat "$OUT/gpu.log"
