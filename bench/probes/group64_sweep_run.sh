#!/usr/bin/env bash
# One device call: decode launches for KV heads shared by many query heads (MiniMax-M3's
# index key: 64 query heads over one K-only head of 128; its K/V layers: 64 over 4), B=2 at
# 131,072 tokens, f16, q8_0 and q4_0: the decode's own launch (0/0/0) against 4- and 8-warp
# programs of 16-64 query rows. sweep.json of each under $OUT/index and $OUT/kv.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
cfgs="0/0/0,32/4/2/0/0/16,32/4/2/0/0/32,32/4/2/0/0/64,64/4/2/0/0/64,64/4/2/0/0/32,32/8/2/0/0/64,64/8/2/0/0/64,16/4/2/0/0/64,32/4/1/0/0/64"
mkdir -p "$OUT/index" "$OUT/kv"
timeout 280 python3 bench/decode_sweep.py --no-split --formats f16,q8_0,q4_0 --shapes 2x131072 \
    --heads 64/1/128/k --configs "$cfgs" --out "$OUT/index" 2>&1 | grep -v Warning | cut -c1-300
timeout 220 python3 bench/decode_sweep.py --no-split --formats f16,q8_0,q4_0 --shapes 2x131072 \
    --heads 64/4/128 --configs "$cfgs" --out "$OUT/kv" 2>&1 | grep -v Warning | cut -c1-300
