#!/usr/bin/env bash
# One device call: the rotated formats' append with the centroid search's FMA form (default
# since v63; its comparisons by fma.sat since v64) against the selects, K and V in one
# launch, three rounds in turns, with the bytes against the reference (bench/append_sweep.py;
# into append-sweep.json). By default: the selects at their launch (3 programs of 168
# registers, one stage) and the FMA form at tbq4's and tbq3's (3 of 168 in two stages, 4 of
# 128 in one). CONFIGS: other launches (append_sweep.py --configs
# rows/warps/programs/stages/registers/one launch/fma/bias in quarters).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/append_sweep.py --formats ${FORMATS:-tbq4,tbq3} --rounds 3 \
  --configs ${CONFIGS:-64/4/3/1/168/1/0,64/4/3/2/168/1/1,64/4/4/1/128/1/1} 2>&1 | grep -v Warn | grep -v "^{" | cut -c1-300
