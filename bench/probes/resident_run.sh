#!/usr/bin/env bash
# One device call: the shared memory of fp8_pth's, nvfp4's, kivi2's and kivi4's decode launches
# beside their registers, to learn what holds 191-243-register one-warp programs to 8 a
# multiprocessor (split_check and kivi_check record both; one shape each, no counts timed).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/split" "$OUT/kivi"
timeout 60 python3 bench/split_check.py --out "$OUT/split" --formats fp8_pth,nvfp4 --splits "" \
  --shapes 8x32768,32x32768 2>&1 | grep -v Warning | cut -c1-300
timeout 60 python3 bench/kivi_check.py --out "$OUT/kivi" --no-check --shapes 8x32768 \
  --configs 1/2/0 2>&1 | grep -v Warning | cut -c1-300
ls -R "$OUT"
