#!/usr/bin/env bash
# One device call: decode's GPU check of the Gluon kernel forced (bench/decode.py's _check:
# three sequences of 1,000, 1 and 777 tokens, a shuffled block table) for q4_0, whose launches
# over so few rows take PIPE since v56, and q8_0, at pages of 32, 64 and 96 tokens.
set -u
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 100 python3 - "$OUT" <<'PY' 2>&1 | grep -v Warn
import json, sys
sys.path.insert(0, "bench")
from decode import _check, compiled
from kvcore.kernels.gluon_q4_0 import q4_0_swapped_kernel
out = {f"{fmt}_page_{p}": _check(fmt, p, gluon=True) for fmt in ("q4_0", "q8_0")
       for p in (32, 64, 96)}
out["compiled"] = list(compiled(q4_0_swapped_kernel).values())
print(json.dumps(out, indent=1))
json.dump(out, open(sys.argv[1] + "/pipe-check.json", "w"), indent=1)
PY
