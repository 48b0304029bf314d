#!/usr/bin/env bash
# One device call after GROUP_LAUNCH's 128-lane entries: the default launch against the torch
# reference for 64 query heads over one head (K only and K/V) and over four, in q8_0 and q4_0
# (launch.json); its time on MiniMax-M3's index shape (index/sweep.json, the decode's own
# launch only); and kvplan measure on MiniMax-M3's cache in q8_0 and q4_0.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="${TMPDIR:-/tmp}/measurements.sqlite3"
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 200 python3 bench/launch_check.py --formats q8_0,q4_0 \
    --heads 64/1/128/k,64/1/128,64/4/128,128/2/128 --out "$OUT" 2>&1 | tail -12
mkdir -p "$OUT/index"
timeout 150 python3 bench/decode_sweep.py --no-split --formats f16,q8_0,q4_0 --shapes 2x131072 \
    --heads 64/1/128/k --configs 0/0/0 --out "$OUT/index" 2>&1 | grep -v Warning | cut -c1-300
cfg=tests/data/configs/minimax-m3-vl.json
for kv in q8_0 q4_0; do
    timeout 100 python3 -m app.cli measure "$cfg" --kv "$kv" --ctx 131072 --seqs 2 \
        --json > "$OUT/measure-$kv.json" 2> /dev/null
    echo "$kv rc $?"; grep -o '"seconds_per_step": [0-9.e-]*\|"per_kind_seconds": {[^}]*}' "$OUT/measure-$kv.json" | tr '\n' ' '; echo
done
