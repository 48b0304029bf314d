#!/usr/bin/env bash
# One device call: the KIVI Gluon kernel's V_AFTER form (the values' scales on the weights, their
# codes as float16 subnormals) checked against the Triton kernel and decode_ref, then timed in
# turns against the default form, kivi2 then kivi4 (bench/probes/gluon_kivi.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
SHAPES=${SHAPES:-1x131072,8x131072,1x32768,8x32768,64x32768,1x4096,1x1048576}
for fmt in kivi2 kivi4; do
  timeout 280 python3 bench/probes/gluon_kivi.py --out "$OUT" --format $fmt --groups 1,4,8,12 \
    --launches 12c168,12c168v --shapes "$SHAPES" --rounds 3 2>&1 | grep -v Warn | cut -c1-1800
done
ls "$OUT"
