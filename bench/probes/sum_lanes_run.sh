#!/usr/bin/env bash
# One device call: kernel v69 (each running sum kept by place, SUM_LANES) against v68's kernel
# (carried as .base/gluon_q4_0.py from commit 0fde599), in turns (bench/probes/base_turns.py):
# q4_0 as decode launches it (8 a multiprocessor, PIPE), at 10 and 12 with PIPE (registers
# capped at 200 and 168) and with lazy rescaling; then the other formats as decode launches them.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/q4_0" "$OUT/rest"
P12="cache.GLUON_PER_SM_Q4=12,gluon.Q4_PIPE_PER_SM=12,gluon.Q4_PIPE_REGISTERS=168"
P10="cache.GLUON_PER_SM_Q4=10,gluon.Q4_PIPE_PER_SM=10,gluon.Q4_PIPE_REGISTERS=200"
OUT="$OUT/q4_0" FORMATS=q4_0 LIMIT=300 LAUNCHES="new:;p12:$P12;p10:$P10;lazy:consts.LAZY=1" \
  bash bench/probes/base_turns_run.sh
OUT="$OUT/rest" FORMATS=q8_0,nvfp4,tbq3,tbq4 LIMIT=270 bash bench/probes/base_turns_run.sh
