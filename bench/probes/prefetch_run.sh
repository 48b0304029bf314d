#!/usr/bin/env bash
# One device call: each decode program asking L2 for its first N tokens before it waits on the
# step before (decode(prefetch=N)) against the default, for FORMATS at batch 1 (32k to 1M) and
# batch 8 and 64, with the output compared bit for bit (bench/split_check.py --prefetch).
set -u
export PYTHONUNBUFFERED=1
FORMATS=${FORMATS:-f16,q8_0,q4_0}
SHAPES=${SHAPES:-1x32768,1x131072,1x1048576,8x32768,8x131072,64x32768}
PREFETCH=${PREFETCH:-64,128,256,512,128}
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout "${LIMIT:-500}" python3 bench/split_check.py --out "$OUT" --formats "$FORMATS" \
  --shapes "$SHAPES" --splits "" --prefetch "$PREFETCH" 2>&1 | grep -v Warning | cut -c1-400
ls -R "$OUT"
