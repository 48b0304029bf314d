#!/usr/bin/env bash
# One device call after the split kernel rotates a rotated format's query and partial outputs
# itself (decode_split_kernel's ROT_Q, ROT_V: heads of 128 lanes in one part): the rotation
# probe (in the kernel, in their own launches, none), the decode benchmark for tbq4 and tbq3,
# the launch tables' check against the reference, and the three bench/verify.py plans whose
# rotated heads are 128 lanes (Qwen3-8B tbq4 128k × 4, Qwen3-8B q8_0/tbq3 128k, Llama-4-Scout
# tbq4 1M).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== rotations"
timeout 150 python3 bench/probes/rotation_cost.py --out "$OUT" 2>&1 | grep -v Warning
bash bench/gpu_rotated_checks.sh
