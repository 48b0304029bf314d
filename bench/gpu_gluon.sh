#!/usr/bin/env bash
# One device call: the Gluon decode probe (bench/probes/gluon_q4_0.py) for FORMAT (q4_0, the
# default, or q8_0): its check against decode_ref on small paged caches, then the Gluon kernel
# under several launches against decode's split kernel (gluon=False) and torch's fp16 SDPA, and a
# summary line per config.
set -u
export PYTHONUNBUFFERED=1 FORMAT="${FORMAT:-q4_0}"
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
timeout 500 python3 bench/probes/gluon_q4_0.py --format "$FORMAT" --out "$OUT" \
  --shapes "${SHAPES:-1x131072,8x131072,1x32768}" \
  --per-sm "${PER_SM:-8,10,12}" --regs "${REGS:-0,168}" \
  --variants "${VARIANTS:-swapped3,k-after,v-after,after}" 2>&1 | grep -v Warning | grep -v "^sync-\|per_sm1 " | tail -40
python3 - <<'PY'
import json, os
r = json.load(open(f"{os.environ['OUT']}/gluon-{os.environ['FORMAT']}.json"))
bad = {k: v for k, v in r["check"].items() if v["nan"] or v["vs_ref"] > 2 * v["decode_vs_ref"] + 1e-4}
print("check cases", len(r["check"]), "bad", bad)
for row in r["rows"]:
    for c in row["configs"]:
        print(row["batch"], row["tokens"], c["variant"], c["per_sm"], c["regs"], f'{c["seconds"] * 1e6:.1f}us',
              f'{c["vs_sdpa"]:.2f}x', f'{c["fraction_of_read_bw"]:.0%}', f'{c["diff_vs_decode"]:.1e}',
              "split", f'{row["decode_seconds"] * 1e6:.1f}us')
PY
