#!/usr/bin/env bash
# One device call: the Gluon kernel over few (sequence, KV head) rows at one wave of fewer
# programs a multiprocessor than reside (q8_0 6 and 7 against its 8, q4_0 10 and 11 against
# its 12), twice over (bench/probes/gluon_waves.py --waves 1).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for pass in a b; do
  timeout 150 python3 bench/probes/gluon_waves.py --out "$OUT" --name "q8_0-$pass.json" \
    --formats q8_0 --waves 1 --resident 6,7,8 \
    --shapes 1x65536,1x131072,1x262144,1x1048576,2x32768,2x131072,4x32768,4x131072 2>&1 \
    | grep -v Warning | tail -12
  timeout 100 python3 bench/probes/gluon_waves.py --out "$OUT" --name "q4_0-$pass.json" \
    --formats q4_0 --waves 1 --resident 10,11,12 \
    --shapes 1x131072,1x1048576,2x131072,4x32768,4x131072 2>&1 | grep -v Warning | tail -8
done
ls "$OUT"
