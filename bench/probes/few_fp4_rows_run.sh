#!/usr/bin/env bash
# One device call: nvfp4's 4 programs a multiprocessor (GLUON_FEW_FP4, v72: at most 8 rows)
# over 16 and 32 rows at 4k-32k tokens, against its default launch, in turns
# (bench/probes/base_turns.py, the base .base/gluon_q4_0.py). Written for v73, where
# GLUON_FEW_FP4 was (rows, tokens, programs); from v74 its second entry caps rows × tokens, so
# run it at commit 62b318f or spell the launches as rows/rows×tokens/4.
set -u
export PYTHONUNBUFFERED=1
OUT="$OUT" FORMATS=nvfp4 SHAPES=2x4096,2x8192,2x16384,2x32768,4x8192,4x16384,4x32768 ROUNDS=3 \
  LIMIT=400 LAUNCHES="default:;few16:cache.GLUON_FEW_FP4=16/32768/4;few32:cache.GLUON_FEW_FP4=32/32768/4" \
  bash bench/probes/base_turns_run.sh
