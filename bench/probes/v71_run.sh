#!/usr/bin/env bash
# One device call: kernel v71 (commit ba558b8; the tree keeps v70's until it is timed: first
# `git checkout ba558b8 -- kvcore/kernels/gluon_q4_0.py tests/kernels/test_gluon.py`) against
# v70's (carried as .base/gluon_q4_0.py: `mkdir -p .base && git show
# 31b77b4:kvcore/kernels/gluon_q4_0.py > .base/gluon_q4_0.py`), checked on paged caches and
# timed in turns (bench/probes/base_turns.py): each program's first page read beside the
# sequence's length, the query's loads before the first tiles' copies and its operands after.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/q4_0" "$OUT/rest"
SH=1x131072,2x131072,8x32768,8x131072,1x1048576
OUT="$OUT/q4_0" FORMATS=q4_0 SHAPES=$SH LIMIT=200 ROUNDS=3 bash bench/probes/base_turns_run.sh
OUT="$OUT/rest" FORMATS=q8_0,nvfp4,tbq3,tbq4 SHAPES=1x131072,8x32768,8x131072 LIMIT=330 \
  ROUNDS=2 bash bench/probes/base_turns_run.sh
