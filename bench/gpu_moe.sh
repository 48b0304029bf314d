#!/usr/bin/env bash
# One device call: a mixture of experts' routed products at 1-256 tokens a step against the
# share of experts kvplan's decode estimate reads (bench/moe_roofline.py): Qwen3-30B-A3B (16 of
# its 48 layers) and Qwen3-235B-A22B (8 of its 94), both 128 experts and top-8.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for spec in "qwen3-30b-a3b 16" "qwen3-235b-a22b 8"; do
  set -- $spec
  echo "== $1"
  mkdir -p "$OUT/$1"
  timeout 200 python3 bench/moe_roofline.py --model "$1" --layers "$2" --out "$OUT/$1" 2>&1 \
    | grep -v Warning
done
