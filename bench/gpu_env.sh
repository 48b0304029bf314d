#!/usr/bin/env bash
# The card, driver and versions of a device run, with the date, into $OUT/gpu.log (the GPU
# scripts beside this one call it first).
{
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0], 'gpus', torch.cuda.device_count())"
python3 -c "import fastapi" 2>/dev/null && echo "fastapi present" || echo "no fastapi"
date -u
} > "$OUT/gpu.log" 2>&1
