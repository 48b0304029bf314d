#!/usr/bin/env bash
# One device call: q8_0 below B=1 16k, where v72 still runs the split kernel (rows × tokens up
# to GLUON_LEAST_WORK_Q8), it against the Gluon kernel forced there (GLUON_LEAST_WORK_Q8=0),
# in turns (bench/probes/base_turns.py, the base .base/gluon_q4_0.py).
set -u
export PYTHONUNBUFFERED=1
OUT="$OUT" FORMATS=q8_0 SHAPES=1x2048,1x4096,1x8192,2x4096 ROUNDS=3 LIMIT=250 \
  LAUNCHES="split:;gluon:cache.GLUON_LEAST_WORK_Q8=0" bash bench/probes/base_turns_run.sh
