#!/usr/bin/env bash
# One device call (tried and reverted; commit a249f3e holds that kernel): each row's tiles
# shared out evenly among one whole wave of splits, against v70's splits (a split's tiles
# rounded up; carried as .base/gluon_q4_0.py from commit e6d4e58), in turns
# (bench/probes/base_turns.py): q4_0, then nvfp4 and q8_0.
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/q4_0" "$OUT/rest"
OUT="$OUT/q4_0" FORMATS=q4_0 SHAPES=1x131072,8x131072,1x65536,8x32768,4x32768 LIMIT=170 \
  bash bench/probes/base_turns_run.sh
OUT="$OUT/rest" FORMATS=nvfp4,q8_0 SHAPES=1x131072,8x131072 LIMIT=150 \
  bash bench/probes/base_turns_run.sh
