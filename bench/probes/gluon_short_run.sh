#!/usr/bin/env bash
# One device call: where decode's split kernel still runs q4_0 (rows × tokens up to
# GLUON_LEAST_WORK, measured against a Gluon kernel at 12 programs a multiprocessor before
# v62), the split kernel ("split", as decode launches it) against the Gluon kernel
# ("gluon": cache.GLUON_LEAST_WORK=0), in turns (bench/probes/base_turns.py; the base is
# the split kernel there too). fixed-cost-launches-h200.json had B=1 32k at 16.9 µs by the
# Gluon kernel at 8 a multiprocessor against 21.5–22.2 by the split kernel in every decode
# benchmark since v34. Carry .base/gluon_q4_0.py (any earlier commit's kernel file).
set -u
export PYTHONUNBUFFERED=1
FORMATS=q4_0 SHAPES=1x4096,1x8192,1x16384,1x32768,2x16384,4x8192,8x4096 ROUNDS=3 LIMIT=300 \
  LAUNCHES="split:;gluon:cache.GLUON_LEAST_WORK=0" bash bench/probes/base_turns_run.sh
