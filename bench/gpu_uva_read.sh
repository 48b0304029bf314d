#!/usr/bin/env bash
# One device call: a card reading weights left in pinned host memory through unified virtual
# addresses (bench/uva_read.py), the read vLLM's --cpu-offload-gb plans make.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/uva_read.py --out "$OUT" 2>&1 | grep -v Warning
