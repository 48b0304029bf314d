#!/usr/bin/env bash
# One call for kernel v79: KIVI's flush with lane rows of consecutive tokens against token
# order (bench/probes/kivi_lane_tokens.py) on any card; on an H200 then v78's run
# (bench/probes/v78_h200_run.sh, carry .base as it says) with LIMIT seconds for its decode.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout "${LANE_LIMIT:-200}" python3 bench/probes/kivi_lane_tokens.py --out "$OUT" 2>&1 \
  | grep -v Warn | tail -9
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ -d .base ]; then
  LIMIT="${LIMIT:-200}" bash bench/probes/v78_h200_run.sh
fi
