#!/usr/bin/env bash
# One device call: host-to-card copies from pinned and pageable memory and the host memory's
# read rate (bench/host_link.py), the host side of llama.cpp plans with weights in host memory.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 300 python3 bench/host_link.py --out "$OUT" 2>&1 | grep -v Warning
