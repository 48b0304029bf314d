#!/usr/bin/env bash
# One device call: fullest_waves (the default) against the counts before it, twice over, at
# the rows where split-rows-fill-h200.json found it even or slower (fp8_pth B=36 and B=28 32k,
# B=16 128k), at nvfp4's launch boundary (240-272 rows) and at 544 and 736 rows.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for pass in a b; do
  mkdir -p "$OUT/$pass"
  timeout 280 python3 bench/split_check.py --out "$OUT/$pass" --formats fp8_pth,nvfp4 --shapes \
36x32768@7/11,28x32768@9/14,40x32768@6/13,16x131072@16/33,30x32768@8/13/16,34x32768@7/11/15,\
68x32768@3/7,92x32768@2/4 2>&1 | grep -v Warning | cut -c1-300
done
ls -R "$OUT"
