#!/usr/bin/env bash
# One device call for kernel v35's final tables: where q8_0's integer keys at 256 lanes stop
# gaining from one stage (24/4 × 256, 32 to 128 rows), tbq3 and q4_0 in one stage over many
# rows, one stage for GROUP_LAUNCH (DeepSeek-V3's 128 heads over the latent), then every table
# launch against the reference and the verify plans.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
bash bench/gpu_env.sh
timeout 100 python3 bench/decode_sweep.py --heads 24/4/256 --formats q8_0 \
    --no-split --shapes 8x4096,16x4096,32x4096,16x32768 --configs 16/1/1,16/1/3 \
    --out "$OUT/q8" 2>&1 | grep -v Warn | grep "best\|SDPA"
timeout 100 python3 bench/decode_sweep.py --heads 24/4/256 --formats tbq3,q4_0 \
    --no-split --shapes 64x4096,64x32768 --configs 16/1/2,16/1/1,32/1/1 \
    --out "$OUT/many" 2>&1 | grep -v Warn | grep "best\|SDPA"
timeout 150 python3 bench/decode_sweep.py --heads 128/1/576/k \
    --formats f16,fp8_pth,q8_0,tbq3,tbq4,nvfp4 --no-split --shapes 1x131072 \
    --configs 32/4/1/0/0/32,32/8/1/0/0/64,32/4/2/0/0/32 \
    --out "$OUT/group" 2>&1 | grep -v Warn | grep "best\|SDPA"
timeout 100 python3 bench/launch_check.py --workers 12 --out "$OUT/lc" 2>&1 | tail -2
timeout 200 python3 bench/verify.py --out "$OUT/v" > "$OUT/v.log" 2>&1
grep -h "^  |\|failed" "$OUT"/v.log | cut -c1-200
cat "$OUT/gpu.log"
