#!/usr/bin/env bash
# One device call: Qwen3-8B's tbq4 plan (128k × 4, bench/verify.py plan 5) measured again with
# the current launches, then the swapped-products probe (bench/probes/swapped.py) against the
# decode kernel. SWAPPED_ARGS: extra arguments for the probe (SWAPPED_TIMEOUT: its limit in
# seconds, 360); SKIP_VERIFY=1 skips the plan.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
if [ "${SKIP_VERIFY:-0}" != 1 ]; then
  echo "== verify plan 5"
  mkdir -p "$OUT/verify"
  timeout 200 python3 bench/verify.py --start 5 --stop 6 --out "$OUT/verify" 2>&1 \
    | grep -v Warning | head -20
fi
echo "== swapped probe"
timeout ${SWAPPED_TIMEOUT:-360} python3 bench/probes/swapped.py --out "$OUT" ${SWAPPED_ARGS:-} 2>&1 \
  | grep -v Warning | tail -30
