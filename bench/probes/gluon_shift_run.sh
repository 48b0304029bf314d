#!/usr/bin/env bash
# One device call: the Gluon kernel's V_SHIFT (weights times V scales kept in float16's normal
# range) on and off, q4_0 and q8_0: the probe's checks (a case of small values over long rows
# among them) and timings against decode's split kernel.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh > /dev/null 2>&1
for fmt in q4_0 q8_0; do
  if [ $fmt = q4_0 ]; then v=swapped3,after,after-unshifted; p=12,16; else v=q8-s2,q8-s2-unshifted; p=8,12; fi
  mkdir -p "$OUT/$fmt"
  timeout 280 python3 bench/probes/gluon_q4_0.py --format $fmt --out "$OUT/$fmt" --shapes 1x131072,8x131072,8x32768 \
    --per-sm $p --regs 0 --variants $v 2>&1 | grep -v Warning | grep "^B=" 
  FMT=$fmt python3 - <<'PY'
import json, os
fmt = os.environ["FMT"]
r = json.load(open(f"{os.environ['OUT']}/{fmt}/gluon-{fmt}.json"))
for k, v in r["check"].items():
    if "per_sm12" in k:
        print(k, f'{v["vs_ref"]:.2e} split {v["decode_vs_ref"]:.2e} nan {v["nan"]}')
for row in r["rows"]:
    for c in row["configs"]:
        print(row["batch"], row["tokens"], c["variant"], c["per_sm"], f'{c["seconds"] * 1e6:.1f}us', f'{c["vs_sdpa"]:.2f}x', f'{c["fraction_of_read_bw"]:.0%}', "split", f'{row["decode_seconds"]*1e6:.1f}us')
PY
done
