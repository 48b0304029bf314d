#!/usr/bin/env bash
# One device call: kivi2 decode by the Gluon kernel (kernels/gluon_kivi.py), checked against the
# Triton kernel and decode_ref, then timed against it (bench/probes/gluon_kivi.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 500 python3 bench/probes/gluon_kivi.py --out "$OUT" "$@" 2>&1 | grep -v Warn | cut -c1-1500
ls "$OUT"
