#!/usr/bin/env bash
# One device call: the Gluon kernel's tbq3 (or tbq4) form, checked (decode's paged check forced
# at 4, 8 and 16 query heads a KV head, pages of 32, 64 and 96) and timed against
# decode_split_kernel at each count of programs a multiprocessor given
# (bench/probes/gluon_nvfp4.py --format FORMAT):
#   bash bench/probes/gluon_rotated_run.sh [FORMAT [COUNTS [SHAPES]]]
# (tbq3's first run: the defaults, 8 capped at 232 registers and 12 capped at 168).
set -u
export PYTHONUNBUFFERED=1
fmt=${1:-tbq3}
counts=${2:-8p,12pc168}
shapes=${3:-1x8192,1x16384,1x32768,2x16384,1x131072,8x32768,8x131072,1x1048576}
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
mkdir -p "$OUT/check"
timeout 150 python3 bench/probes/gluon_nvfp4.py --format "$fmt" --out "$OUT/check" --per-sm 8p \
  --shapes 1x32768 --rounds 1 2>&1 | grep -v Warn | cut -c1-900
timeout 330 python3 bench/probes/gluon_nvfp4.py --format "$fmt" --out "$OUT" --no-check \
  --per-sm "$counts" --shapes "$shapes" 2>&1 | grep -v Warn | cut -c1-700
ls -R "$OUT"
