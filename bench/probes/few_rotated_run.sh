#!/usr/bin/env bash
# One device call: tbq3 and tbq4 by the Gluon kernel at 4 programs a multiprocessor against 8
# (and tbq3 against its default launch) over few rows and 8k-128k tokens, in turns
# (bench/probes/base_turns.py, the base .base/gluon_q4_0.py).
set -u
export PYTHONUNBUFFERED=1
root=$OUT
mkdir -p "$root/tbq3" "$root/tbq4"
OUT="$root/tbq3" FORMATS=tbq3 SHAPES=1x16384,4x8192,1x32768,2x16384,1x65536,2x32768 ROUNDS=3 \
  LIMIT=240 LAUNCHES="default:;gluon:cache.GLUON_LEAST_WORK_TBQ3=0;gluon4:cache.GLUON_LEAST_WORK_TBQ3=0,cache.GLUON_PER_SM_TBQ3=4" \
  bash bench/probes/base_turns_run.sh
OUT="$root/tbq4" FORMATS=tbq4 SHAPES=1x65536,2x32768,4x16384,1x131072 ROUNDS=3 LIMIT=200 \
  LAUNCHES="gluon:cache.GLUON_LEAST_WORK=0;gluon4:cache.GLUON_LEAST_WORK=0,cache.GLUON_PER_SM_TBQ4=4" \
  bash bench/probes/base_turns_run.sh
