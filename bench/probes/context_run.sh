#!/usr/bin/env bash
# One device call: bench/probes/context.py three times (each a fresh process) into
# $OUT/context.jsonl, with the card's log.
set -u
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
for i in 1 2 3; do python3 bench/probes/context.py | tee -a "$OUT/context.jsonl"; done
