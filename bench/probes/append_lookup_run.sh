#!/usr/bin/env bash
# One device call: the rotated formats' append with the FMA search by lookup (one comparison
# a value: its cell's threshold, lowest centroid and step read from codebook.cells's table)
# against the staircase (one comparison a threshold), K and V in one launch, three rounds in
# turns, with the bytes against the reference (bench/append_sweep.py, into
# append-sweep.json). Compiled for sm_90 (triton 3.6) tbq4's loop takes 20.1 instructions a
# value against 26.1, at 140 registers uncapped (any cap spills); tbq3's 22.0 against 18.5
# (bench/results/append-lookup-sm90.txt).
# By default: each at its launch (tbq4 3 programs of 168 registers in two stages, tbq3 4 of
# 128 in one with its rows a block ahead) and the lookup at 3 programs uncapped in two
# stages and in one. CONFIGS: other launches (append_sweep.py --configs).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 420 python3 bench/append_sweep.py --formats ${FORMATS:-tbq4,tbq3} --rounds 3 \
  --configs ${CONFIGS:-64/4/3/2/168/1/1/0/0,64/4/4/1/128/1/1/0/1,64/4/3/2/0/1/1/0/0/1,64/4/3/1/0/1/1/0/0/1} 2>&1 | grep -v Warn | grep -v "^{" | cut -c1-300
