#!/usr/bin/env bash
# One device call for kernel v35's group launches and q8_0's 256-lane rule: q8_0's integer
# keys at 24/4 × 256 in one stage and three over 64 and 256 rows at 8k-32k tokens; the latent's
# GROUP_LAUNCH in one stage (the defaults) against two stages with 64 and 128 query heads,
# B=4 32k and B=1 128k; every table launch against the reference; the verify plans.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
bash bench/gpu_env.sh
timeout 120 python3 bench/decode_sweep.py --heads 24/4/256 --formats q8_0 \
    --no-split --shapes 16x8192,16x16384,64x8192,64x16384,64x32768 --configs 16/1/1,16/1/3 \
    --out "$OUT/q8" 2>&1 | grep -v Warn | grep "best\|SDPA"
for h in 128/1/576/k 64/1/576/k; do
    timeout 120 python3 bench/decode_sweep.py --heads $h --formats q8_0,tbq3,tbq4,nvfp4 \
        --no-split --shapes 4x32768,1x131072 --configs 32/4/2/0/0/32,32/8/2/0/0/64 \
        --out "$OUT/group-${h%%/*}" 2>&1 | grep -v Warn | grep "best\|SDPA"
done
timeout 100 python3 bench/launch_check.py --workers 12 --out "$OUT/lc" 2>&1 | tail -2
timeout 200 python3 bench/verify.py --out "$OUT/v" > "$OUT/v.log" 2>&1
grep -h "^  |\|failed" "$OUT"/v.log | cut -c1-200
cat "$OUT/gpu.log"
