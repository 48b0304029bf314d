#!/usr/bin/env bash
# One device call: the rotated formats' append with the centroid search's FMA form (v62's
# option fma_search) against the select form, at decode's launch (64 rows, 4 warps, 3
# programs a multiprocessor of 168 registers, K and V in one launch), three rounds in turns,
# with the bytes against the reference (bench/append_sweep.py; into append-sweep.json).
# CONFIGS: other launches (append_sweep.py --configs), e.g. v63's FMA form unbiased and
# biased, at 3 and 4 programs a multiprocessor.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/append_sweep.py --formats ${FORMATS:-tbq4,tbq3} --rounds 3 \
  --configs ${CONFIGS:-64/4/3/1/168/1/0,64/4/3/1/168/1/1} 2>&1 | grep -v Warn | grep -v "^{" | cut -c1-300
