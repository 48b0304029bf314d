#!/usr/bin/env bash
# One device call on a two-GPU machine: versions, the tensor-parallel measurement of a hybrid
# model on both GPUs, then bench/verify.py on GPU 0 beside a decode benchmark on GPU 1
# (BENCH=decode: bench/decode.py, the default; BENCH=sweep: bench/decode_sweep.py).
# Everything lands in $OUT (at most 8 files).
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LIMIT=${LIMIT:-540}
BENCH=${BENCH:-decode}
bash bench/gpu_env.sh
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$gpus" -ge 2 ]; then
  timeout 100 python3 -m app.cli measure qwen3.5-27b --kv tbq4 --ctx 128k --seqs 1 --tp 2 --json > "$OUT/tp2-qwen3.5-27b.json" 2>>"$OUT/gpu.log"
  echo "tp2 qwen3.5 rc $?" >> "$OUT/gpu.log"
  CUDA_VISIBLE_DEVICES=1 timeout $((LIMIT - 100)) python3 "bench/$( [ "$BENCH" = sweep ] && echo decode_sweep || echo decode).py" --out "$OUT" > "$OUT/$BENCH.log" 2>&1 &
fi
CUDA_VISIBLE_DEVICES=0 timeout $((LIMIT - 100)) python3 bench/verify.py --out "$OUT" > "$OUT/verify.log" 2>&1
wait
cat "$OUT/gpu.log"; tail -n 40 "$OUT/$BENCH.log"; tail -n 28 "$OUT/verify.log"
