#!/usr/bin/env bash
# One device call: kivi2's Gluon kernel against the Triton kernel at the decode benchmark's other
# shapes (bench/probes/gluon_kivi.py, its check first), then the decode benchmark for kivi2,
# which now decodes by the Gluon kernel (the README's row).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 240 python3 bench/probes/gluon_kivi.py --out "$OUT" --shapes 1x4096,64x4096,64x32768,1x1048576 \
  --launches 12c168a "$@" 2>&1 | grep -v Warn | cut -c1-900
timeout 300 python3 bench/decode.py --formats kivi2 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^kivi\|correctness\|TB/s\|Error\|error" | cut -c1-2000
ls "$OUT"
