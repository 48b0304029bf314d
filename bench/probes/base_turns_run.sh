#!/usr/bin/env bash
# One device call: the Gluon decode kernel of this tree against kvcore/kernels/gluon_q4_0.py of
# an earlier commit (carried as .base/gluon_q4_0.py: `mkdir -p .base && git show
# COMMIT:kvcore/kernels/gluon_q4_0.py > .base/gluon_q4_0.py`), checked on paged caches and timed
# in turns per format (bench/probes/base_turns.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
FORMATS=${FORMATS:-q4_0,q8_0,nvfp4,tbq3,tbq4}
SHAPES=${SHAPES:-1x131072,8x131072,1x32768,8x32768,64x32768,1x1048576}
timeout ${LIMIT:-560} python3 bench/probes/base_turns.py --base .base/gluon_q4_0.py \
  --formats "$FORMATS" --shapes "$SHAPES" --rounds "${ROUNDS:-3}" --out "$OUT" \
  --launches "${LAUNCHES:-new:}" 2>&1 | grep -v Warn | cut -c1-1500
