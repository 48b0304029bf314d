#!/usr/bin/env bash
# One device call: the short-context launches not yet timed against their alternative, in turns
# (bench/probes/base_turns.py, the base .base/gluon_q4_0.py): q8_0 below B=1 16k (the split
# kernel, v72's rule, against the Gluon kernel forced there), nvfp4 at B=2 and B=8 short
# contexts (the Gluon kernel, v72's rule, against the split kernel forced there).
set -u
export PYTHONUNBUFFERED=1
root=$OUT
mkdir -p "$root/q8" "$root/fp4"
OUT="$root/q8" FORMATS=q8_0 SHAPES=1x2048,1x4096,1x8192,2x4096 ROUNDS=3 LIMIT=240 \
  LAUNCHES="split:;gluon:cache.GLUON_LEAST_WORK_Q8=0" bash bench/probes/base_turns_run.sh
OUT="$root/fp4" FORMATS=nvfp4 SHAPES=2x8192,4x4096,8x4096,8x8192 ROUNDS=3 LIMIT=240 \
  LAUNCHES="gluon:;split:cache.GLUON_LEAST_WORK_FP4=1000000000000" bash bench/probes/base_turns_run.sh
