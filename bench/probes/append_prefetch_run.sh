#!/usr/bin/env bash
# One device call: the rotated append with each program's next rows loaded a block ahead into
# registers (rotated_append_kernel's PREFETCH, one stage) against v64's launches, in turns,
# 16,384 new tokens a call (bench/append_sweep.py; configs: rows/warps/programs a
# multiprocessor/stages/registers/one launch/FMA search/bias quarters/prefetch).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/tbq4" "$OUT/tbq3"
timeout 200 python3 bench/append_sweep.py --out "$OUT/tbq4" --formats tbq4 --rounds 3 \
  --configs 64/4/3/2/168/1/1/0/0,64/4/3/1/168/1/1/0/1 2>&1 | grep -v Warn | cut -c1-300
timeout 200 python3 bench/append_sweep.py --out "$OUT/tbq3" --formats tbq3 --rounds 3 \
  --configs 64/4/4/1/128/1/1/0/0,64/4/4/1/128/1/1/0/1,64/4/3/1/168/1/1/0/1 2>&1 \
  | grep -v Warn | cut -c1-300
ls -R "$OUT"
