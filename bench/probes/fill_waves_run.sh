#!/usr/bin/env bash
# One device call: fp8_pth and nvfp4 under fullest_waves (the default) beside the counts the
# rule before it took (one wave of 16 rounded down) and their neighbours, over 128-800 rows,
# with each launch's registers (WHOLE_RESIDENT).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 500 python3 bench/split_check.py --out "$OUT" --formats fp8_pth,nvfp4 --shapes \
28x32768@9/14,36x32768@7/11,40x32768@6/13,48x32768@5/8/11,56x32768@4/7,72x32768@3/5/7,\
96x32768@2/4/5,100x32768@2/5,16x131072@16/33,36x131072@7/11,56x131072@4/7 2>&1 \
  | grep -v Warning | cut -c1-400
ls "$OUT"
