#!/usr/bin/env bash
# One device call after tbq4's and tbq3's norm became a row scale where a head is one 128-value
# block (decode_split_kernel's NK, NV: the centroids unpacked without the norm, the scores and
# the weights multiplied by it): checks against the reference (bench/probes/int_keys.py with no
# shapes: each format with itself and with float16 values), the decode benchmark for tbq4 and
# tbq3, the launch tables' check, and the three bench/verify.py plans with such heads (Qwen3-8B
# tbq4 128k × 4, Qwen3-8B q8_0/tbq3 128k × 1, Llama-4-Scout tbq4 1M × 1). In the run of 15:03
# the first step was given K/V pairs, which the probe skips: it checked nothing; tbq4 and tbq3
# then had the row norm on K and V (tbq3 keeps it on V only since).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== mixed formats against the reference"
timeout 90 python3 bench/probes/int_keys.py --formats tbq4,tbq3 \
  --base "" --variant "" --configs "" --shapes "" --out "$OUT/mixed" 2>&1 | grep "^check\|Error"
bash bench/gpu_rotated_checks.sh
