#!/usr/bin/env bash
# One device call, prepared for the next step after kernel v34: q8_0 (integer keys) and fp8_pth
# with their tiles loaded in one stage (straight into registers) against their launches, at
# B=1 and B=8, 128k tokens and B=1, 32k (bench/decode_sweep.py; each format's default is timed
# too); then KIVI's decode and tbq4's swapped launch in one stage. Compiled for sm_90, one
# stage drops q8_0's shared-memory loads from 140 to 18 a 32-token step, but takes 246
# registers instead of 168.
# Its results: bench/results/stages-next-h200.json (2026-12-01).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
timeout 250 python3 bench/decode_sweep.py --formats q8_0 --no-split \
    --shapes 1x131072,8x131072,1x32768 \
    --configs 32/1/3/0/0/0/4,32/1/1/0/0/0/4,32/1/1/12/168/0/4,32/1/1/8/0/0/4,16/1/1/0/0/0/4,64/1/1/0/0/0/4 \
    --out "$OUT/q8_0" 2>&1 | grep -v Warn | tail -8
timeout 250 python3 bench/decode_sweep.py --formats fp8_pth --no-split \
    --shapes 1x131072,8x131072,1x32768 \
    --configs 32/1/2/0/0/0/4,32/1/1/0/0/0/4,32/1/1/12/168/0/4,64/1/1/0/0/0/8,16/1/1/0/0/0/4 \
    --out "$OUT/fp8_pth" 2>&1 | grep -v Warn | tail -8
# KIVI's decode with one stage (warps/stages/split; the default is 1/2/0)
timeout 200 python3 bench/kivi_check.py --no-check --configs 1/2/0,1/1/0,1/1/0/0/0/16/128 \
    --shapes 1x131072,8x32768 --out "$OUT/kivi" 2>&1 | grep -v Warn | tail -8
# tbq4's swapped launch in 32-token one-stage programs at B=1 4k and 32k, which v34's probe
# did not time (within 2% at 128k)
timeout 150 python3 bench/probes/swapped.py --formats tbq4 --shapes 1x4096,1x32768,64x32768 \
    --configs 16/1/3/8/128/16,32/1/1/8/128/16 --out "$OUT/tbq4" 2>&1 | grep -v Warn | tail -4
cat "$OUT/gpu.log"
