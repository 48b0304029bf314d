#!/usr/bin/env bash
# One device call: versions, the CLI's measure without the web extra, the tensor-parallel
# measurement on two GPUs, then bench/verify.py. Everything lands in $OUT.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0], 'gpus', torch.cuda.device_count())"
python3 -c "import fastapi" 2>/dev/null && echo "fastapi present" || echo "no fastapi (as expected)"
timeout 120 python3 -m app.cli measure llama-3.1-8b --kv q4_0 --ctx 32k --seqs 2
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  timeout 150 python3 -m app.cli measure llama-3.1-70b --kv q8_0 --ctx 32k --seqs 2 --tp 2 --json > "$OUT/tp2-llama-3.1-70b.json"; echo "tp2 llama rc $?"
  timeout 150 python3 -m app.cli measure qwen3.5-27b --kv tbq4 --ctx 128k --seqs 1 --tp 2 --json > "$OUT/tp2-qwen3.5-27b.json"; echo "tp2 qwen rc $?"
  python3 -m app.cli measure llama-3.1-70b --kv q8_0 --ctx 32k --seqs 2 --tp 2
fi
timeout "${VERIFY_LIMIT:-400}" python3 bench/verify.py --out "$OUT" 2>&1 | tee "$OUT/verify.log"
