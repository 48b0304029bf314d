#!/usr/bin/env bash
# One device call: the short contexts where decode still takes the split kernel for nvfp4,
# tbq4 and tbq3, against the Gluon kernel forced there (its least work 0) at its count and, for
# tbq4 and tbq3, at 4 programs a multiprocessor (nvfp4 takes 4 there already, GLUON_FEW_FP4),
# in turns (bench/probes/base_turns.py, the base .base/gluon_q4_0.py).
set -u
export PYTHONUNBUFFERED=1
root=$OUT
mkdir -p "$root/fp4" "$root/tbq4" "$root/tbq3"
OUT="$root/fp4" FORMATS=nvfp4 SHAPES=1x2048,1x4096,1x8192,2x4096 ROUNDS=3 LIMIT=150 \
  LAUNCHES="split:;gluon:cache.GLUON_LEAST_WORK_FP4=0" bash bench/probes/base_turns_run.sh
OUT="$root/tbq4" FORMATS=tbq4 SHAPES=1x4096,1x8192,1x16384,1x32768,2x8192 ROUNDS=3 LIMIT=180 \
  LAUNCHES="split:;gluon:cache.GLUON_LEAST_WORK=0;gluon4:cache.GLUON_LEAST_WORK=0,cache.GLUON_PER_SM_TBQ4=4" \
  bash bench/probes/base_turns_run.sh
OUT="$root/tbq3" FORMATS=tbq3 SHAPES=1x4096,1x8192,1x16384,2x8192 ROUNDS=3 LIMIT=180 \
  LAUNCHES="split:;gluon:cache.GLUON_LEAST_WORK_TBQ3=0;gluon4:cache.GLUON_LEAST_WORK_TBQ3=0,cache.GLUON_PER_SM_TBQ3=4" \
  bash bench/probes/base_turns_run.sh
