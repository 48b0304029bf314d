#!/usr/bin/env bash
# One device call for the appends that miss their target: the rotated formats' persistent
# append with and without its next block loaded ahead (rows/warps/programs a
# multiprocessor/stages/registers/prefetch), and KIVI's append with its ring slots written by
# kivi_ring_kernel against torch indexing (bench/probes/kivi_append.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== rotated append"
timeout 300 python3 bench/append_sweep.py --formats tbq4,tbq3 --out "$OUT" --configs \
  "${APPEND_CONFIGS:-64/4/3/1/168/0,64/4/3/1/168/1,64/4/2/1/255/0,64/4/2/1/255/1,64/4/2/1/200/1,32/4/3/1/168/1,32/4/4/1/128/1,32/4/4/1/128/0,128/8/1/1/255/1}" \
  2>&1 | grep -v Warning
echo "== kivi append"
timeout 200 python3 bench/probes/kivi_append.py --out "$OUT" 2>&1 | grep -v Warning | cut -c1-600
