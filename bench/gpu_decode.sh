#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/decode.py over all formats, split in two halves
# that run side by side (GPU 0: f16, bf16, fp8_pth, q8_0; GPU 1: the 4- and 3-bit formats),
# then the launch-configuration sweep (bench/decode_sweep.py) likewise split.
# Results land in $OUT/a and $OUT/b (decode.json, sweep.json) and the logs in $OUT.
set -u
export PYTHONUNBUFFERED=1
LIMIT=${LIMIT:-540}
{
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
date -u
} > "$OUT/gpu.log" 2>&1
half() {  # GPU, folder, decode formats, sweep formats
  CUDA_VISIBLE_DEVICES=$1 timeout "$LIMIT" bash -c "python3 bench/decode.py --formats $3 --out $OUT/$2 > $OUT/decode-$2.log 2>&1; python3 bench/decode_sweep.py --no-split --formats $4 --out $OUT/$2 > $OUT/sweep-$2.log 2>&1"
}
half 0 a f16,bf16,fp8_pth,q8_0 f16,fp8_pth,q8_0 &
half 1 b q4_0,tbq4,tbq3,nvfp4 q4_0,tbq4,tbq3,nvfp4 &
wait
cat "$OUT/gpu.log"
for x in a b; do grep -v "^{\|^correctness" "$OUT/decode-$x.log" | tail -n 34; tail -n 12 "$OUT/sweep-$x.log"; done
