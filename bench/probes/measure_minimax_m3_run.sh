#!/usr/bin/env bash
# One device call: kvplan measure on MiniMax-M3's cache (the published minimax_m3_vl config:
# K and V of 60 layers, a 128-wide index key in 57) in three formats, with the card's log; each
# measurement a JSON file under $OUT. On an H200 the same call then runs the decode benchmark
# for FORMATS (default q8_0,tbq3), writing decode.json.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="${TMPDIR:-/tmp}/measurements.sqlite3"
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
cfg=tests/data/configs/minimax-m3-vl.json
for kv in f16 q8_0 q4_0; do
    timeout 100 python3 -m app.cli measure "$cfg" --kv "$kv" --ctx 131072 --seqs 2 \
        --json > "$OUT/measure-$kv.json" 2> "$OUT/measure-$kv.err"
    echo "$kv rc $?"; head -c 600 "$OUT/measure-$kv.json"; echo; tail -2 "$OUT/measure-$kv.err"
    rm -f "$OUT/measure-$kv.err"
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    timeout "${LIMIT:-300}" python3 bench/decode.py --formats "${FORMATS:-q8_0,tbq3}" \
        --out "$OUT" 2>&1 | grep -v Warning \
        | grep "^[a-z0-9_]* *B=\|correctness\|TB/s\|Error\|error" | cut -c1-600
fi
