#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/decode.py over all formats, split in two halves
# that run side by side (GPU 0: f16, bf16, fp8_pth, q8_0; GPU 1: the 4- and 3-bit formats).
# Results land in $OUT/a and $OUT/b (decode.json each) and the logs in $OUT.
set -u
export PYTHONUNBUFFERED=1
LIMIT=${LIMIT:-500}
{
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
date -u
} > "$OUT/gpu.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout "$LIMIT" python3 bench/decode.py --formats f16,bf16,fp8_pth,q8_0 \
  --out "$OUT/a" > "$OUT/decode-a.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout "$LIMIT" python3 bench/decode.py --formats q4_0,tbq4,tbq3,nvfp4 \
  --out "$OUT/b" > "$OUT/decode-b.log" 2>&1 &
wait
cat "$OUT/gpu.log"; grep -v "^{" "$OUT/decode-a.log" | tail -n 40; grep -v "^{" "$OUT/decode-b.log" | tail -n 40
