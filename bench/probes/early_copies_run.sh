#!/usr/bin/env bash
# One device call (tried and reverted; commit 61d9d9b holds that kernel): each program's first
# tiles copied before its query is loaded, so that the two latencies overlap, against v70's
# kernel (carried as .base/gluon_q4_0.py from commit a649695), in turns
# (bench/probes/base_turns.py): q4_0 as decode launches it and with PIPE in four stages, then
# the other formats as decode launches them.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/q4_0" "$OUT/rest"
SH=1x131072,8x131072,1x65536,8x32768,1x32768
OUT="$OUT/q4_0" FORMATS=q4_0 SHAPES=$SH LIMIT=200 LAUNCHES="new:;s4:consts.STAGES=4" \
  bash bench/probes/base_turns_run.sh
OUT="$OUT/rest" FORMATS=nvfp4,tbq3,tbq4,q8_0 SHAPES=$SH LIMIT=300 bash bench/probes/base_turns_run.sh
