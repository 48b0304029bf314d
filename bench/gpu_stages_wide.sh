#!/usr/bin/env bash
# One device call, prepared after kernel v34: one-stage launches (tiles straight into
# registers) on heads wider than 128 lanes, against WIDE_LAUNCH's (bench/decode_sweep.py; the
# decode's own launch is timed too): Qwen3.5's 24/4 × 256 full-attention heads at B=1 262k and
# B=8 32k, and DeepSeek-V2-Lite's 576-wide latent (16 heads, K only) at B=1 128k.
# Its results: bench/results/decode-sweep-stages-wide-h200.json (2026-12-01).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
timeout 270 python3 bench/decode_sweep.py --heads 24/4/256 --formats q4_0,fp8_pth,q8_0,tbq4,nvfp4 \
    --no-split --shapes 1x262144,8x32768 --configs 16/1/2,16/1/1,32/1/1 \
    --out "$OUT/w256" 2>&1 | grep -v Warn | grep "best\|SDPA"
timeout 270 python3 bench/decode_sweep.py --heads 16/1/576/k --formats f16,q4_0,fp8_pth,q8_0 \
    --no-split --shapes 1x131072 --configs 16/2/2,16/2/1,32/2/1 \
    --out "$OUT/mla" 2>&1 | grep -v Warn | grep "best\|SDPA"
cat "$OUT/gpu.log"
