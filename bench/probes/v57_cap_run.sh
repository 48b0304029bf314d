#!/usr/bin/env bash
# One device call: the Gluon kernel's nvfp4 form with its registers capped at 168 (decode's
# launch) against uncapped, in turns with the split kernel (bench/probes/gluon_nvfp4.py), then
# the decode benchmark for nvfp4 (bench/probes/decode_run.sh).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
timeout 200 python3 bench/probes/gluon_nvfp4.py --out "$OUT" --no-check --per-sm 8p,8pu,12p,12pu \
  --shapes 1x32768,1x131072,8x32768,8x131072,1x1048576 2>&1 | grep -v Warn | cut -c1-700
bash bench/probes/decode_run.sh nvfp4
