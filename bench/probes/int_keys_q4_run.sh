#!/usr/bin/env bash
# q4_0's keys as an integer product (int_keys=1: the nibbles masked out four to a register by
# PTX, in the block's own order) against its float16 path, every probe launch at the probe's
# five shapes; then where q4_0's time goes: q4_0 keys with f16 values and the reverse, under
# each side's default path.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== q4_0 int_keys"
timeout 330 python3 bench/probes/int_keys.py --formats q4_0 --out "$OUT/q4" 2>&1 \
  | grep "^q4_0\|^check\|^read\|Error"
echo "== K/V split"
timeout 200 python3 bench/probes/int_keys.py --formats q4_0/f16,f16/q4_0 --configs "" \
  --shapes 1x131072,8x131072,8x32768 --out "$OUT/split" 2>&1 | grep "^q4_0\|^f16\|Error"
