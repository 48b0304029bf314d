#!/usr/bin/env bash
# One device call after GROUP_LAUNCH's 512-lane and further 128-lane entries: the default launch
# against the torch reference for 64 query heads over one head of 128 (K only, K/V) and over
# one 512-value latent (launch.json); kvplan measure on GLM-5.3-Flash's cache in q8_0, q4_0 and
# tbq4 (its 64 query heads a latent).
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="${TMPDIR:-/tmp}/measurements.sqlite3"
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 240 python3 bench/launch_check.py --formats fp8_pth,nvfp4,q8_0,q4_0,tbq4 \
    --heads 64/1/128/k,64/1/128,64/1/512/k --out "$OUT" 2>&1 | tail -18
cfg=tests/data/glm-5.3-flash-config.json
for kv in q8_0 q4_0 tbq4; do
    timeout 100 python3 -m app.cli measure "$cfg" --kv "$kv" --ctx 131072 --seqs 2 \
        --json > "$OUT/measure-glm53-$kv.json" 2> /dev/null
    echo "$kv rc $?"; grep -o '"seconds_per_step": [0-9.e-]*' "$OUT/measure-glm53-$kv.json"
done
