#!/usr/bin/env bash
# One device call: the prefill estimate against Qwen3-8B's prompt of 4k-128k tokens through its
# products and causal attention on the card (bench/prefill_roofline.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/qwen3-8b"
timeout 500 python3 bench/prefill_roofline.py --model qwen3-8b --out "$OUT/qwen3-8b" 2>&1 \
  | grep -v Warning
