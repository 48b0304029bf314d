#!/usr/bin/env bash
# One call for kernels v79–v80. On an H200 first the decode benchmark for q4_0, nvfp4, kivi2 and
# kivi4 (LIMIT seconds; never yet timed there). On any card KIVI's flush with lane rows of
# consecutive tokens, a Newton reciprocal and packed ranges against token order
# (bench/probes/kivi_lane_tokens.py). Then q4_0's and nvfp4's appends against commit
# 6e8dc78's (carry .base as bench/probes/v78_h200_run.sh says) and this tree's with q4_0's
# floor by a rounded add (cache.APPEND_Q4_FLOOR_ADD).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
h200=0
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && h200=1
if [ "$h200" = 1 ]; then
  timeout "${LIMIT:-170}" python3 bench/decode.py --formats "${FORMATS:-q4_0,nvfp4,kivi2,kivi4}" \
      --out "$OUT" 2>&1 | grep -v Warning \
      | grep "^[a-z0-9_]* *B=\|identical\|TB/s\|Error\|error" | cut -c1-300
fi
timeout "${LANE_LIMIT:-170}" python3 bench/probes/kivi_lane_tokens.py --out "$OUT" 2>&1 \
  | grep -v Warn | tail -9
if [ -d .base ]; then
  timeout 120 python3 bench/probes/append_base.py --base .base/triton_ops.py \
      --formats q4_0,nvfp4 --floor-add --out "$OUT" 2>&1 | grep -v Warn | tail -6
fi
