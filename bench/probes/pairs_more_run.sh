#!/usr/bin/env bash
# One device call: the PAIRS form for nvfp4 where decode runs it 8 a multiprocessor (splits of
# at most 1,024 tokens), and q4_0 at B=1 with 6 programs a multiprocessor (PIPE and PAIRS),
# against v70's kernel as decode launches it (carried as .base/gluon_q4_0.py from commit
# ed272c3), in turns (bench/probes/base_turns.py).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/nvfp4" "$OUT/q4_0"
PAIRS="consts.PAIRS=1,consts.PIPE=0,consts.STAGES=4"
OUT="$OUT/nvfp4" FORMATS=nvfp4 SHAPES=1x131072,1x65536,4x32768,2x32768 LIMIT=200 \
  LAUNCHES="pairs:$PAIRS" bash bench/probes/base_turns_run.sh
OUT="$OUT/q4_0" FORMATS=q4_0 SHAPES=1x131072,1x65536,1x262144 LIMIT=200 \
  LAUNCHES="six:cache.GLUON_PER_SM_Q4=6;six-pairs:cache.GLUON_PER_SM_Q4=6,$PAIRS,consts.SUM_LANES=1" \
  bash bench/probes/base_turns_run.sh
