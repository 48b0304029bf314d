#!/usr/bin/env bash
# One device call: q4_0's PAIRS form (two whole tiles a step, one softmax over both, copies two
# tiles ahead in four stages) against decode's PIPE form (kernel v69, carried as
# .base/gluon_q4_0.py from commit a20089e), in turns (bench/probes/base_turns.py): at 8 programs
# a multiprocessor (registers capped at 232) and at 12 (168).
set -u
export PYTHONUNBUFFERED=1
PAIRS="consts.PAIRS=1,consts.PIPE=0,consts.STAGES=4,consts.SUM_LANES=1"
P12="cache.GLUON_PER_SM_Q4=12,gluon.Q4_PIPE_REGISTERS=168"
FORMATS=q4_0 SHAPES=${SHAPES:-1x131072,8x131072,1x65536,8x32768,64x32768,1x1048576,4x32768} \
  LAUNCHES="pairs:$PAIRS;pairs12:$PAIRS,$P12" bash bench/probes/base_turns_run.sh
