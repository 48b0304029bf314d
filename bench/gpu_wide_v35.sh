#!/usr/bin/env bash
# One device call after kernel v35 (one-stage launches on heads wider than 128 lanes,
# WIDE_FORMAT_LAUNCH and INT_KEYS_LAUNCH_256): each changed format's new default against its old
# launch at shapes the first sweep did not time (24/4 × 256 at B=1 32k and B=64 4k; the MLA
# latent at B=4 32k); one stage for the formats not yet tried (f16 and tbq3 at 256 lanes,
# tbq3, tbq4 and nvfp4 on the latent); every table launch against the reference; the verify
# plans.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
bash bench/gpu_env.sh
timeout 150 python3 bench/decode_sweep.py --heads 24/4/256 --formats q4_0,nvfp4,tbq4,q8_0 \
    --no-split --shapes 1x32768,64x4096 --configs 16/1/2,16/1/3 \
    --out "$OUT/w256" 2>&1 | grep -v Warn | grep "best\|SDPA"
timeout 120 python3 bench/decode_sweep.py --heads 24/4/256 --formats f16,tbq3 \
    --no-split --shapes 1x262144,8x32768,1x32768 --configs 16/1/1,32/1/1 \
    --out "$OUT/w256b" 2>&1 | grep -v Warn | grep "best\|SDPA"
timeout 120 python3 bench/decode_sweep.py --heads 16/1/576/k --formats q4_0,q8_0,tbq3,tbq4,nvfp4 \
    --no-split --shapes 1x131072,4x32768 --configs 16/2/2,16/2/1,32/4/1 \
    --out "$OUT/mla" 2>&1 | grep -v Warn | grep "best\|SDPA"
timeout 100 python3 bench/launch_check.py --workers 12 --out "$OUT/lc" 2>&1 | tail -2
timeout 200 python3 bench/verify.py --out "$OUT/v" > "$OUT/v.log" 2>&1
grep -h "^  |\|failed" "$OUT"/v.log | cut -c1-200
cat "$OUT/gpu.log"
