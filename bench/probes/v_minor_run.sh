#!/usr/bin/env bash
# q8_0's V planes laid token-minor within their page (decode(v_minor=True): a thread's tokens
# load as one vector, straight into the P·V product's operand layout) against the default
# token-major V, the keys integer products in both; five shapes, five launches.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 420 python3 bench/probes/int_keys.py --formats q8_0 --base "" --variant v_minor=1 \
  --configs 32/1/3/4,32/1/2/4,32/1/3/8,64/1/2/4,16/1/3/4 --out "$OUT" 2>&1 \
  | grep "^q8_0\|^check\|^read\|Error"
