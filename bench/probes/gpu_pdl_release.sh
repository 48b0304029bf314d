#!/usr/bin/env bash
# One device call: whole-model decode steps (bench/probes/step_chain.py) with this tree's
# kernels and with EARLY's (a folder holding another checkout's kvcore/ and bench/: the merge
# and rotation kernels letting their dependents in at their start), then the decode benchmark
# for FORMATS with this tree.
set -u
export PYTHONUNBUFFERED=1
EARLY=${EARLY:-early} FORMATS=${FORMATS:-q4_0,tbq4}
PLANS=${PLANS:-gpt-oss-120b:q4_0:131072:4,llama-3.1-8b:q4_0:131072:1,qwen3-8b:tbq4:131072:4,qwen3-8b:tbq3:32768:1,gemma-3-27b-it:q8_0:131072:2,qwen3-8b:kivi4:32768:2}
bash bench/gpu_env.sh
for tree in . "$EARLY"; do
    name=$([ "$tree" = . ] && echo late || echo early)
    echo "== $name"
    timeout 240 python3 "$tree/bench/probes/step_chain.py" --given-only --plans "$PLANS" \
        --out "$OUT/$name" 2>&1 | grep -v Warn
done
timeout 250 python3 bench/decode.py --formats "$FORMATS" --out "$OUT/decode" 2>&1 | tail -30
cat "$OUT/gpu.log"
