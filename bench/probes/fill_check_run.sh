#!/usr/bin/env bash
# One device call: fp8_pth's and nvfp4's decode at fullest_waves' counts against the
# reference and against the count before (bench/probes/fill_check.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 400 python3 bench/probes/fill_check.py --out "$OUT" 2>&1 | grep -v Warning | cut -c1-400
ls "$OUT"
