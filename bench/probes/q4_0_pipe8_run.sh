#!/usr/bin/env bash
# One device call: q4_0's Gluon kernel at v55's 8 programs a multiprocessor, as it runs against
# its PIPE form at up to 232 registers (bench/probes/q4_0_pipe8.py, three rounds in turns).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 150 python3 bench/probes/q4_0_pipe8.py --out "$OUT" 2>&1 | grep -v Warn
ls "$OUT"
