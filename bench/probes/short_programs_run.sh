#!/usr/bin/env bash
# One device call: at short contexts, where v72 runs q4_0 (and nvfp4) by the Gluon kernel,
# fewer programs a multiprocessor than its 8 (longer splits, fewer partial results to merge,
# fewer program starts), in turns (bench/probes/base_turns.py, the base .base/gluon_q4_0.py:
# v70's kernel file, the tree's).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/q4_0" "$OUT/nvfp4"
OUT="$OUT/q4_0" FORMATS=q4_0 SHAPES=1x8192,1x16384,1x32768,1x65536,2x32768 ROUNDS=3 LIMIT=250 \
  LAUNCHES="p8:;p6:cache.GLUON_PER_SM_Q4=6;p4:cache.GLUON_PER_SM_Q4=4" \
  bash bench/probes/base_turns_run.sh
OUT="$OUT/nvfp4" FORMATS=nvfp4 SHAPES=1x16384,1x32768,1x65536 ROUNDS=3 LIMIT=200 \
  LAUNCHES="p8:;p4:cache.GLUON_PER_SM_SHORT=4" bash bench/probes/base_turns_run.sh
