#!/usr/bin/env bash
# One device call: decode launches for 64 query heads over one K-only head, B=2: GLM-5.3-Flash's
# 512-value latent at 32,768 tokens (f16, q8_0, q4_0, tbq4; at 131,072 fp16 SDPA's baseline over
# 64 expanded heads of 512 runs out of memory on 80 GB) and 128-lane heads at 131,072 in the
# formats v75 left untimed (fp8_pth, tbq4, tbq3, nvfp4). sweep.json of each under $OUT/latent
# and $OUT/index.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/latent" "$OUT/index"
timeout 300 python3 bench/decode_sweep.py --no-split --formats f16,q8_0,q4_0,tbq4 \
    --shapes 2x32768 --heads 64/1/512/k \
    --configs "0/0/0,32/2/1/0/0/16,32/4/1/0/0/16,32/4/1/0/0/32,32/4/2/0/0/32,16/4/1/0/0/32,32/8/1/0/0/64,16/8/1/0/0/64" \
    --out "$OUT/latent" 2>&1 | grep -v Warning | cut -c1-300
timeout 200 python3 bench/decode_sweep.py --no-split --formats fp8_pth,tbq4,tbq3,nvfp4 \
    --shapes 2x131072 --heads 64/1/128/k \
    --configs "0/0/0,64/4/2/0/0/64,32/4/2/0/0/64,64/4/1/0/0/64,64/8/2/0/0/64" \
    --out "$OUT/index" 2>&1 | grep -v Warning | cut -c1-300
