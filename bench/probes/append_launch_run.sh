#!/usr/bin/env bash
# One device call: append with K and V in one launch (v62) against a launch a side, each format
# at its own APPEND_LAUNCH (rows a program / warps), three rounds in turns
# (bench/append_sweep.py --configs R/W/0/0/0/1,R/W/0/0/0/0; each format into its own folder).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for fw in ${FORMATS:-f16:32/4 fp8_pth:64/2 q8_0:8/2 q4_0:8/1 nvfp4:8/1}; do
  f=${fw%%:*}; c=${fw#*:}
  mkdir -p "$OUT/$f"
  timeout 150 python3 bench/append_sweep.py --formats "$f" --out "$OUT/$f" --rounds 3 \
    --configs "$c/0/0/0/1,$c/0/0/0/0" 2>&1 | grep -v Warn | grep -v "^{" | cut -c1-300
done
