#!/usr/bin/env bash
# One device call: q4_0's decode benchmark under v62's launch rule and v61's, one process each,
# in turns (RULES, "v62 v61 v62 v61" by default; bench/probes/q4_0_rule.py), into
# $OUT/<rule>-<turn>/decode.json.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
i=0
for rule in ${RULES:-v62 v61 v62 v61}; do
  i=$((i + 1))
  timeout ${TIMEOUT:-140} python3 bench/probes/q4_0_rule.py "$rule" --out "$OUT/$rule-$i" 2>&1 \
    | grep -v Warn | grep "^rule\|^q4_0\|rror" | cut -c1-200
done
