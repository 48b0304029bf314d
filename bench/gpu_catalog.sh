#!/usr/bin/env bash
# One device call: bench/catalog_check.py over catalog models, each model whole (every layer)
# at 256 tokens × 2 in every kernel format, so that every layer kind and head shape of the
# catalog meets the kernels' launches. MODELS (comma-separated ids, default every catalog
# model) and NAME (the result's stem) come from the environment.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
NAME=${NAME:-catalog}
args=(--workers "${WORKERS:-16}" --per-process 12 --layers 1000 --out "$OUT/$NAME")
[ -n "${MODELS:-}" ] && args+=(--models "$MODELS")
timeout "${LIMIT:-540}" python3 bench/catalog_check.py "${args[@]}" 2>&1 | tail -40
