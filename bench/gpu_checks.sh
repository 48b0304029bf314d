#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/verify.py's plans in two shares, one a GPU, then
# an append launch sweep (bench/append_sweep.py) on GPU 0 beside the KIVI launch check
# (bench/kivi_check.py) on GPU 1. Results: $OUT/a/verify.json, $OUT/b/verify.json,
# $OUT/append-sweep.json, $OUT/kivi.json, with gpu.log and every process's output in log.txt.
#   APPEND_FORMATS, APPEND_CONFIGS: append_sweep.py's --formats and --configs
#   KIVI_CONFIGS: kivi_check.py's --configs ("none": no KIVI check); SPLIT: the first plan of
#   GPU 1's share
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="${TMPDIR:-/tmp}/measurements.sqlite3"
bash bench/gpu_env.sh
SPLIT=${SPLIT:-13}
LOGS=$(mktemp -d)
(CUDA_VISIBLE_DEVICES=0 timeout 250 python3 bench/verify.py --stop "$SPLIT" --out "$OUT/a" > "$LOGS/verify-a.log" 2>&1
 CUDA_VISIBLE_DEVICES=0 timeout 250 python3 bench/append_sweep.py --out "$OUT" \
     --formats "${APPEND_FORMATS:-tbq4,tbq3}" ${APPEND_CONFIGS:+--configs "$APPEND_CONFIGS"} \
     > "$LOGS/append.log" 2>&1) &
(CUDA_VISIBLE_DEVICES=1 timeout 250 python3 bench/verify.py --start "$SPLIT" --out "$OUT/b" > "$LOGS/verify-b.log" 2>&1
 if [ "${KIVI_CONFIGS:-}" != none ]; then
   CUDA_VISIBLE_DEVICES=1 timeout 250 python3 bench/kivi_check.py --out "$OUT" \
       ${KIVI_CONFIGS:+--configs "$KIVI_CONFIGS"} > "$LOGS/kivi.log" 2>&1
 fi) &
wait
for f in "$LOGS"/*.log; do echo "== $(basename "$f")"; cat "$f"; done > "$OUT/log.txt"
cat "$OUT/gpu.log"; grep "^  |\|failed\|Error" "$LOGS"/verify-*.log | cut -c1-300
tail -n 40 "$LOGS"/append.log "$LOGS"/kivi.log 2>/dev/null
