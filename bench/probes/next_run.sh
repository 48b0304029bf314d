#!/usr/bin/env bash
# One device call: the decode benchmark for fp8_pth and nvfp4 under v52's split (the README's
# rows are v35's), then one wave against two over 320 to 448 rows, where two whole waves were
# faster at 384 rows (split-rows-v52-h200.json).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 280 python3 bench/decode.py --formats fp8_pth,nvfp4 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^fp8_pth\|^nvfp4\|Error\|error" | cut -c1-300
timeout 240 python3 bench/split_check.py --out "$OUT" --formats fp8_pth,nvfp4 \
  --shapes 40x32768,48x32768,56x32768,48x131072 --splits 4,5,6,7,8,9,10,11,12,13 2>&1 \
  | grep -v Warning | tail -8
ls "$OUT"
