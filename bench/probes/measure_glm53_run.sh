#!/usr/bin/env bash
# One device call: kvplan measure on GLM-5.3-Flash's cache (the test config: 11 MLA latents, a
# pooled index key a 4 tokens, the open pools and 34 KDA states) in four formats, with the
# card's log; each measurement a JSON file under $OUT.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="${TMPDIR:-/tmp}/measurements.sqlite3"
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
cfg=tests/data/glm-5.3-flash-config.json
for kv in f16 q8_0 q4_0 tbq4; do
    timeout 120 python3 -m app.cli measure "$cfg" --kv "$kv" --ctx 131072 --seqs 2 \
        --json > "$OUT/measure-$kv.json" 2> "$OUT/measure-$kv.err"
    echo "$kv rc $?"; head -c 600 "$OUT/measure-$kv.json"; echo; tail -2 "$OUT/measure-$kv.err"
done
