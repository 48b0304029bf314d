#!/usr/bin/env bash
# One device call: where decode's split kernel still runs q4_0, q8_0 and tbq4 (rows × tokens
# up to GLUON_LEAST_WORK, set against a Gluon kernel at 12 programs a multiprocessor before
# v62), the split kernel ("split", as decode launches it) against the Gluon kernel ("gluon":
# cache.GLUON_LEAST_WORK=0), in turns (bench/probes/base_turns.py; the base is the split
# kernel there too). fixed-cost-launches-h200.json had B=1 32k at 16.9 µs (q4_0) and 26.1
# (q8_0) by the Gluon kernel at 8 a multiprocessor, against 21.5–22.2 and 32.0 by the split
# kernel in the decode benchmarks (decode-h200-v70-*.md); gluon-tbq4-h200.json had tbq4's
# split kernel faster at B=1 32k (30.6 against 31.2). Carry .base/gluon_q4_0.py (any earlier
# commit's kernel file).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/q4_0" "$OUT/rest"
OUT="$OUT/q4_0" FORMATS=q4_0 SHAPES=1x4096,1x8192,1x16384,1x32768,2x16384,8x4096 ROUNDS=3 \
  LIMIT=260 LAUNCHES="split:;gluon:cache.GLUON_LEAST_WORK=0" bash bench/probes/base_turns_run.sh
OUT="$OUT/rest" FORMATS=q8_0,tbq4 SHAPES=1x16384,1x32768,2x16384 ROUNDS=3 LIMIT=260 \
  LAUNCHES="split:;gluon:cache.GLUON_LEAST_WORK=0" bash bench/probes/base_turns_run.sh
