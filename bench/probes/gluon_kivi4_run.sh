#!/usr/bin/env bash
# One device call: kivi4 by the Gluon kernel (kernels/gluon_kivi.py, BITS 4), checked against
# the Triton kernel and decode_ref and timed against it (bench/probes/gluon_kivi.py --format
# kivi4), then the decode benchmark for kivi4, which now decodes by it (the README's row).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 260 python3 bench/probes/gluon_kivi.py --out "$OUT" --format kivi4 \
  --shapes 1x4096,1x32768,64x4096,1x131072,8x131072 --launches 12c168,8u "$@" 2>&1 \
  | grep -v Warn | cut -c1-1500
timeout 300 python3 bench/decode.py --formats kivi4 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^kivi\|correctness\|TB/s\|Error\|error" | cut -c1-400
ls "$OUT"
