#!/usr/bin/env bash
# One device call: the rotated append on wide heads under v64's launches (tbq4 3 programs of
# 168 registers in two stages, tbq3 4 of 128 in one), the FMA search at v62's resources (3 of
# 168, one stage) and v62's selects, two rounds in turns: an MLA latent (1 KV head of 576, K
# only; 16-row programs) and 8 heads of 256 (32-row programs), into $OUT/mla and $OUT/256.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 200 python3 bench/append_sweep.py --heads 128/1/576/k --formats tbq4,tbq3 --rounds 2 \
  --configs 16/4/3/1/168/1/0,16/4/3/1/168/1/1,16/4/3/2/168/1/1,16/4/4/1/128/1/1 \
  --out "$OUT/mla" 2>&1 | grep -v Warn | grep -v "^{" | cut -c1-260
timeout 200 python3 bench/append_sweep.py --heads 32/8/256 --formats tbq4,tbq3 --rounds 2 \
  --configs 32/4/3/1/168/1/0,32/4/3/1/168/1/1,32/4/3/2/168/1/1,32/4/4/1/128/1/1 \
  --out "$OUT/256" 2>&1 | grep -v Warn | grep -v "^{" | cut -c1-260
