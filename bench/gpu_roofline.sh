#!/usr/bin/env bash
# One device call: the decode estimate's bandwidth and compute ceilings against a dense model's
# weight products on the card (bench/decode_roofline.py), for Qwen3-8B and Llama-3.1-8B.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for model in qwen3-8b llama-3.1-8b; do
  echo "== $model"
  mkdir -p "$OUT/$model"
  timeout 240 python3 bench/decode_roofline.py --model "$model" --out "$OUT/$model" 2>&1 \
    | grep -v Warning
done
