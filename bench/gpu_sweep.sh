#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/decode_sweep.py (no K/V split) over the launch
# configurations in $CONFIGS and the batch x tokens shapes in $SHAPES (default B=1 and B=8 at
# 128k), the formats $FORMATS_A on GPU 0 and $FORMATS_B on GPU 1. CONFIGS_A/_B, SHAPES_A/_B and
# HEADS_A/_B (decode_sweep.py's --heads, query heads/KV heads/head_dim[/k]) set one GPU's own.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
C=${CONFIGS:-32/1/2,32/1/3,16/1/2,64/1/2,64/2/2,64/2/3,128/2/2}
S=${SHAPES:-1x131072,8x131072}
(CUDA_VISIBLE_DEVICES=0 timeout 520 python3 bench/decode_sweep.py --no-split \
  --configs "${CONFIGS_A:-$C}" --shapes "${SHAPES_A:-$S}" ${HEADS_A:+--heads "$HEADS_A"} \
  --formats "${FORMATS_A:-f16,fp8_pth,q8_0}" --out "$OUT/a") > "$OUT/a.log" 2>&1 &
(CUDA_VISIBLE_DEVICES=1 timeout 520 python3 bench/decode_sweep.py --no-split \
  --configs "${CONFIGS_B:-$C}" --shapes "${SHAPES_B:-$S}" ${HEADS_B:+--heads "$HEADS_B"} \
  --formats "${FORMATS_B:-q4_0,tbq4,tbq3,nvfp4}" --out "$OUT/b") > "$OUT/b.log" 2>&1 &
wait
cat "$OUT/gpu.log" "$OUT/a.log" "$OUT/b.log" | cut -c1-300 | tail -n 80
