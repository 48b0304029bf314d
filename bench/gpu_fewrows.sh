#!/usr/bin/env bash
# One device call after FEW_ROWS_LONG (q8_0 and q4_0 over few rows and long contexts: 12
# one-warp programs a multiprocessor, registers capped at 168): the new default against the
# old launch (8 programs, uncapped) at B=1, 2 and 4, with the capped launch checked against
# the torch reference at B=1 and B=2 over 128k; the decode benchmark for f16, q8_0 and q4_0
# (every shape of bench/decode.py: a second call, SKIP=1, runs only that); the launch
# tables' check.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
[ "${SKIP:-0}" = 1 ] && { echo "== decode f16,q8_0,q4_0"; timeout 560 python3 bench/decode.py \
  --formats f16,q8_0,q4_0 --out "$OUT" 2>&1 | grep -v Warning | tail -30; exit; }
echo "== new default against the old launch"
timeout 260 python3 bench/probes/int_keys.py --formats q8_0,q4_0 --base "" --variant "" \
  --long-check 1x131072,2x131072 \
  --shapes 1x32768,1x65536,1x131072,2x131072,4x131072,4x65536,1x1048576 \
  --configs 0/0/0/0/0/8 --out "$OUT/fewrows" 2>&1 | grep "^q\|^check\|^read\|Error"
echo "== launch check"
timeout 150 python3 bench/launch_check.py --workers 12 --out "$OUT" 2>&1 | tail -4
