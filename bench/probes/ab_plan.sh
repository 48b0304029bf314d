#!/usr/bin/env bash
# One device call: a bench/verify.py plan (PLAN, 0-based) measured with this tree and with an
# older one (OLD, a folder holding that checkout's kvcore/ and bench/, e.g. from
# `git archive COMMIT kvcore bench | tar -x -C OLD`), twice each, alternating; then
# decode_sweep.py at HEADS and SHAPES in FORMAT, each tree. Was the step slower for the code
# or for the run?
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
PLAN=${PLAN:-15} OLD=${OLD:-old} HEADS=${HEADS:-64/8/64} SHAPES=${SHAPES:-4x131072}
FORMAT=${FORMAT:-q4_0} CONFIGS=${CONFIGS:-32/1/3}
bash bench/gpu_env.sh
for i in 1 2; do
    for tree in . "$OLD"; do
        name=$([ "$tree" = . ] && echo new || echo old)$i
        timeout 200 python3 "$tree/bench/verify.py" --start "$PLAN" --stop $((PLAN + 1)) \
            --out "$OUT/$name" > "$OUT/$name.log" 2>&1
        echo "$name $(grep -h '^  |' "$OUT/$name.log" | cut -c1-200)"
    done
done
for tree in . "$OLD"; do
    name=$([ "$tree" = . ] && echo sweep-new || echo sweep-old)
    echo "$name"
    timeout 200 python3 "$tree/bench/decode_sweep.py" --heads "$HEADS" --shapes "$SHAPES" \
        --formats "$FORMAT" --no-split --configs "$CONFIGS" --out "$OUT/$name" 2>&1 | tail -4
done
cat "$OUT/gpu.log"
