#!/usr/bin/env bash
# One device call after KIVI's append writes its ring slots in the flush's launch (v37): the
# append probe (bytes against the torch append on random rows and on rows whose quotients fall
# on the rounding midpoints, also in two launches with the ring-writing programs first; time in
# one launch, in two, and with the ring by torch indexing), then the decode benchmark for kivi2
# and kivi4 (its GPU check appends in chunks that flush ring tokens while new ones take their
# slots; its append column).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== kivi append"
timeout 240 python3 bench/probes/kivi_append.py --out "$OUT" 2>&1 | grep -v Warning \
  | cut -c1-1500
echo "== decode kivi2, kivi4"
timeout 300 python3 bench/decode.py --formats kivi2,kivi4 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^kivi\|bytes_per_s\|identical\|Error\|error"
ls "$OUT"
