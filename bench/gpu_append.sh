#!/usr/bin/env bash
# One device call after KIVI's flush kernel walks the channels in blocks of one group (and
# reads its rows in vectors) and its ring slots come from one kernel: the append probe (bytes
# against the torch append, time at the default launch, at 2 and 4 warps, and with the ring by
# torch indexing), the decode benchmark for kivi2 and kivi4 (its append column), and the four
# bench/verify.py plans in KIVI formats through kvplan measure. (Its first version, at commit
# 7e4ce14, timed a prefetching rotated append too: append-prefetch-h200.json.)
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== kivi append"
timeout 200 python3 bench/probes/kivi_append.py --warps 2,4 --out "$OUT" 2>&1 | grep -v Warning \
  | cut -c1-900
echo "== decode kivi2, kivi4"
timeout 300 python3 bench/decode.py --formats kivi2,kivi4 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^kivi\|bytes_per_s"
for plan in 19 20 24 25; do
  echo "== verify plan $plan"
  mkdir -p "$OUT/verify$plan"
  timeout 90 python3 bench/verify.py --start $plan --stop $((plan + 1)) --out "$OUT/verify$plan" \
    2>&1 | grep -v Warning | head -2
done
