#!/usr/bin/env bash
# One device call: bench/verify.py's four KIVI plans after KIVI's decode moved to the Gluon
# kernel (v65): Llama-3.1-70B kivi2 8k (4 layers) and Qwen3-8B kivi4 4k × 2 (8 layers) decode by
# it; DeepSeek-V2-Lite's K-only latent and Phi-3-mini's 96-lane heads by the Triton kernel.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for plan in 19 20 24 25; do
  echo "== verify plan $plan"
  mkdir -p "$OUT/verify$plan"
  timeout 100 python3 bench/verify.py --start $plan --stop $((plan + 1)) --out "$OUT/verify$plan" \
    2>&1 | grep -v Warning | head -4
done
ls -R "$OUT"
