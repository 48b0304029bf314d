#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/verify.py's plans in two shares (as
# gpu_verify.sh), then the launch sweep of DeepSeek-V3's 128-head latent for $V3_FORMATS on GPU 0
# and, on GPU 1, the decode's own launch on that shape for every format against the 16-row
# launch it had before GROUP_LAUNCH.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
bash bench/gpu_env.sh
SPLIT=${SPLIT:-13}
C=16/2/2/0/0/16,16/4/2/0/0/16,32/4/2/0/0/16,16/4/2/0/0/32,32/4/2/0/0/32,16/8/2/0/0/32
C=$C,16/4/2/0/0/64,16/8/2/0/0/64,32/8/2/0/0/64,16/4/1/0/0/64
(export CUDA_VISIBLE_DEVICES=0
 timeout 300 python3 bench/verify.py --stop "$SPLIT" --out "$OUT/a"
 timeout 200 python3 bench/decode_sweep.py --no-split --heads 128/1/576/k --shapes 1x131072 \
   --formats "${V3_FORMATS:-tbq3,nvfp4}" --configs "$C" --out "$OUT/c") > "$OUT/a.log" 2>&1 &
(export CUDA_VISIBLE_DEVICES=1
 timeout 300 python3 bench/verify.py --start "$SPLIT" --out "$OUT/b"
 timeout 200 python3 bench/decode_sweep.py --no-split --heads 128/1/576/k --shapes 1x131072 \
   --configs 16/2/2/0/0/16 --out "$OUT/d") > "$OUT/b.log" 2>&1 &
wait
cat "$OUT/gpu.log"; grep "^  |\|failed\|best\|Error" "$OUT/a.log" "$OUT/b.log" | cut -c1-250
