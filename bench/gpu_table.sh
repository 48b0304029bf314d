#!/usr/bin/env bash
# bench/decode.py over every format at the current kernel, on a one-GPU machine, in three device
# calls (each within the 600 s a call may run): PART=1 f16, bf16, fp8_pth, q8_0; PART=2 q4_0,
# tbq4, tbq3, nvfp4; PART=3 kivi2, kivi4, then bench/gpu_wide512.sh's sweep and checks. The
# three decode.json files together are one table for the README (merge their rows; each run
# measures its own read bandwidth, so compare fractions, not seconds, across parts).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
case "${PART:-1}" in
  1) formats=f16,bf16,fp8_pth,q8_0 ;;
  2) formats=q4_0,tbq4,tbq3,nvfp4 ;;
  3) formats=kivi2,kivi4 ;;  # 300 s, leaving gpu_wide512.sh its 180
  *) echo "PART must be 1, 2 or 3" >&2; exit 2 ;;
esac
limit=420
[ "${PART:-1}" = 3 ] && limit=300
timeout "$limit" python3 bench/decode.py --formats "$formats" --out "$OUT/decode" 2>&1 \
  | grep -v "^{\|^correctness"
if [ "${PART:-1}" = 3 ]; then
  bash bench/gpu_wide512.sh
fi
cat "$OUT/gpu.log"
