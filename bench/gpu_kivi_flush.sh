#!/usr/bin/env bash
# One device call after KIVI's flush reads each row through one pointer chosen per row (in
# vectors) and quantizes with the reciprocal of its scale, rounding by one add: the append
# probe (bytes against the torch append on random rows and on rows whose quotients fall on
# the rounding midpoints; time at the default launch, at 96 registers, and with the ring by
# torch indexing), the same probe timing the flush kernel of commit 940ec09 (write it first:
#   git show 940ec09:kvcore/kernels/kivi_triton.py \
#     | sed 's/^from .triton_ops import/from kvcore.kernels.triton_ops import/' \
#     > bench/probes/kivi_flush_v35.py
# its bytes differ from the new reference's by design), and the decode benchmark for kivi2
# and kivi4 (its append column). Ran at commit dc42388; since v37 the kernel takes more arguments,
# so the old kernel can no longer stand in for it.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== kivi append"
timeout 200 python3 bench/probes/kivi_append.py --registers 96 --out "$OUT" 2>&1 \
  | grep -v Warning | cut -c1-1200
if [ -f bench/probes/kivi_flush_v35.py ]; then
  echo "== kivi append, the flush kernel of 940ec09"
  timeout 200 python3 bench/probes/kivi_append.py --old probes.kivi_flush_v35 --registers 96 \
    --out "$OUT" 2>&1 | grep -v Warning | cut -c1-1200
fi
echo "== decode kivi2, kivi4"
timeout 300 python3 bench/decode.py --formats kivi2,kivi4 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^kivi\|bytes_per_s"
ls "$OUT"
