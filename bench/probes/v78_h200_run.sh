#!/usr/bin/env bash
# One H200 call for what kernel v78 changed: the decode benchmark for q4_0, nvfp4, kivi2, kivi4
# (FORMATS; LIMIT seconds), q4_0's and nvfp4's appends against an earlier commit's (carried as
# .base/triton_ops.py, bench/probes/append_base.py) and v77's KIVI probe
# (bench/probes/kivi_batched_append.py) into $OUT/k. Stops at once on another card.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200"; exit 3; }
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout "${LIMIT:-220}" python3 bench/decode.py --formats "${FORMATS:-q4_0,nvfp4,kivi2,kivi4}" \
    --out "$OUT" 2>&1 | grep -v Warning \
    | grep "^[a-z0-9_]* *B=\|identical\|TB/s\|Error\|error" | cut -c1-300
timeout 120 python3 bench/probes/append_base.py --base .base/triton_ops.py --formats q4_0,nvfp4 \
    --out "$OUT" 2>&1 | grep -v Warn | tail -6
mkdir -p "$OUT/k"
timeout 100 python3 bench/probes/kivi_batched_append.py --rounds 2 --out "$OUT/k" 2>&1 \
  | grep -v Warn | tail -10
