#!/usr/bin/env bash
# One call for kernel v81 (the plain appends' divisions rounded to nearest). On an H200 the
# decode benchmark for q4_0, nvfp4, kivi2 and kivi4 (LIMIT seconds; their appends of v77-v81
# never timed there). On any card the appends' bytes against the reference for q8_0 and nvfp4
# on TOKENS tokens (bench/probes/append_exact.py without its division check, done on an H100),
# then fp8_pth's and q8_0's append timing against commit 9ffd97d's kernel when .base is carried
# (mkdir -p .base && git show 9ffd97d:kvcore/kernels/triton_ops.py > .base/triton_ops.py;
# BASE_LIMIT=0 leaves it out).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
# ANY_CARD=1 runs the decode benchmark on whatever card came; EXACT_LIMIT=0 leaves out the bytes.
if [ "${ANY_CARD:-0}" = 1 ] || nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout "${LIMIT:-300}" python3 bench/decode.py --formats "${FORMATS:-q4_0,nvfp4,kivi2,kivi4}" \
      --out "$OUT" 2>&1 | grep -v Warning \
      | grep "^[a-z0-9_]* *B=\|identical\|TB/s\|Error\|error" | cut -c1-300
fi
if [ "${EXACT_LIMIT:-200}" != 0 ]; then
  timeout "${EXACT_LIMIT:-200}" python3 bench/probes/append_exact.py --formats q8_0,nvfp4 \
      --tokens "${TOKENS:-32768}" --division-rounds 0 --out "$OUT" 2>&1 | grep -v Warn | tail -14
fi
if [ -d .base ] && [ "${BASE_LIMIT:-90}" != 0 ]; then
  timeout "${BASE_LIMIT:-90}" python3 bench/probes/append_base.py --base .base/triton_ops.py \
      --formats fp8_pth,q8_0 --out "$OUT" 2>&1 | grep -v Warn | tail -6
fi
