#!/usr/bin/env bash
# One device call: the append kernel of this tree against an earlier commit's (carried as
# .base/triton_ops.py: `mkdir -p .base && git show COMMIT:kvcore/kernels/triton_ops.py >
# .base/triton_ops.py`), bytes against the reference, then timed in turns
# (bench/probes/append_base.py; FORMATS, SHAPES, ROUNDS).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout "${LIMIT:-240}" python3 bench/probes/append_base.py --base .base/triton_ops.py \
    --formats "${FORMATS:-q4_0}" --shapes "${SHAPES:-1x4096,8x32768}" --rounds "${ROUNDS:-3}" \
    --out "$OUT" 2>&1 | grep -v Warn | tail -12
