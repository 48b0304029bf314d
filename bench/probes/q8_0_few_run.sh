#!/usr/bin/env bash
# One device call: q8_0's Gluon kernel over few (sequence, KV head) rows at one wave of 2 to 6
# programs a multiprocessor against its default, three rounds in alternating order
# (bench/probes/gluon_waves.py --rounds 3); then the page-shift probe's outputs compared on one
# query (bench/probes/page_shift.py, one pass).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 330 python3 bench/probes/gluon_waves.py --out "$OUT" --name q8_0-few-rounds.json \
  --formats q8_0 --waves 1 --resident 2,3,4,5,6,8 --rounds 3 \
  --shapes 1x65536,1x131072,1x196608,1x262144,2x32768,2x65536,2x131072,4x32768 2>&1 \
  | grep -v Warning | tail -9
timeout 120 python3 bench/probes/page_shift.py --out "$OUT" --passes 1 --shapes 8x32768,1x131072 \
  --name page-shift-same.json 2>&1 | grep -v "Warn\|^checks"
ls "$OUT"
