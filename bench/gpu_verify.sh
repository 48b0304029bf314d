#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/verify.py's plans in two shares, one per GPU
# (each process measures its own plans; the allocator model starts from its own snapshot).
# Merge with: python3 -c 'import json,sys; print(json.dumps(sum((json.load(open(f)) for f in sys.argv[1:]), []), indent=2))' a/verify.json b/verify.json
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
bash bench/gpu_env.sh
SPLIT=${SPLIT:-13}
CUDA_VISIBLE_DEVICES=0 timeout 500 python3 bench/verify.py --stop "$SPLIT" --out "$OUT/a" > "$OUT/a.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 500 python3 bench/verify.py --start "$SPLIT" --out "$OUT/b" > "$OUT/b.log" 2>&1 &
wait
cat "$OUT/gpu.log"; grep "^  |\|failed" "$OUT/a.log" "$OUT/b.log" | cut -c1-300
