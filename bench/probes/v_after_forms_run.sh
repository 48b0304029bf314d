#!/usr/bin/env bash
# One device call: the KIVI Gluon kernel's V_AFTER form where decode does not take it yet (the
# 16-column form at GQA 64/4, heads of 64 lanes at GQA 64/8), checked and timed in turns against
# those launches, then bench/verify.py's two KIVI plans that decode by the Gluon kernel.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for fmt in kivi2 kivi4; do
  mkdir -p "$OUT/g16-$fmt" "$OUT/l64-$fmt"
  timeout 110 python3 bench/probes/gluon_kivi.py --out "$OUT/g16-$fmt" --format $fmt \
    --heads 64/4/128 --groups 12,16 --shapes 1x131072,8x32768,8x131072 --launches 8c232n,8c232v \
    --rounds 3 2>&1 | grep -v Warn | cut -c1-1200
  timeout 90 python3 bench/probes/gluon_kivi.py --out "$OUT/l64-$fmt" --format $fmt \
    --heads 64/8/64 --groups 4,8 --shapes 1x131072,8x131072 --launches 12c168n,12c168v \
    --rounds 3 2>&1 | grep -v Warn | cut -c1-1200
done
for plan in 19 20; do
  echo "== verify plan $plan"
  mkdir -p "$OUT/verify$plan"
  timeout 60 python3 bench/verify.py --start $plan --stop $((plan + 1)) --out "$OUT/verify$plan" \
    2>&1 | grep -v Warning | head -4
done
ls -R "$OUT"
