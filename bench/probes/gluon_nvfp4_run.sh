#!/usr/bin/env bash
# One device call: the Gluon kernel's nvfp4 form, checked and timed against decode_split_kernel
# (bench/probes/gluon_nvfp4.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 420 python3 bench/probes/gluon_nvfp4.py --out "$OUT" "$@" 2>&1 | grep -v Warn | cut -c1-600
ls "$OUT"
