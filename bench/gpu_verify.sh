#!/usr/bin/env bash
# One device call: bench/verify.py's plans. On two GPUs in two shares, one per GPU (each
# process measures its own plans; the allocator model starts from its own snapshot); merge
# with: python3 -c 'import json,sys; print(json.dumps(sum((json.load(open(f)) for f in sys.argv[1:]), []), indent=2))' a/verify.json b/verify.json
# On one GPU in one process, into $OUT/a.
set -u
export PYTHONUNBUFFERED=1 KVPLAN_DB="$OUT/measurements.sqlite3"
bash bench/gpu_env.sh
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    SPLIT=${SPLIT:-13}
    CUDA_VISIBLE_DEVICES=0 timeout 500 python3 bench/verify.py --stop "$SPLIT" --out "$OUT/a" > "$OUT/a.log" 2>&1 &
    CUDA_VISIBLE_DEVICES=1 timeout 500 python3 bench/verify.py --start "$SPLIT" --out "$OUT/b" > "$OUT/b.log" 2>&1 &
    wait
else
    timeout 560 python3 bench/verify.py --out "$OUT/a" > "$OUT/a.log" 2>&1
fi
cat "$OUT/gpu.log"; grep -h "^  |\|failed" "$OUT"/*.log | cut -c1-300
