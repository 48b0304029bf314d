#!/usr/bin/env bash
# One device call: the KIVI Gluon kernel's K_SUB form (the keys' codes as float16 subnormals, the
# query times the channel scales, the minimums' term by a product of its own) beside V_AFTER,
# checked against the Triton kernel and decode_ref, then timed in turns against V_AFTER alone,
# kivi2 then kivi4 (bench/probes/gluon_kivi.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
SHAPES=${SHAPES:-1x131072,8x131072,1x32768,8x32768,64x32768,1x4096}
for fmt in kivi2 kivi4; do
  mkdir -p "$OUT/$fmt"
  timeout 270 python3 bench/probes/gluon_kivi.py --out "$OUT/$fmt" --format $fmt --groups 1,4,8,12 \
    --launches 12c168v,12c168vz --shapes "$SHAPES" --rounds 3 2>&1 | grep -v Warn | cut -c1-2500
done
ls -R "$OUT"
