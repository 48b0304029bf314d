set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh > /dev/null 2>&1
timeout 400 python3 bench/probes/gluon_q4_0.py --format q8_0 --out "$OUT" --shapes 1x131072,8x131072,8x32768 --per-sm 8,11,12 --regs 0 --variants q8-s2,q8-s3 2>&1 | grep -v Warning | tail -30
python3 - <<'PY'
import json, os
r = json.load(open(os.environ["OUT"] + "/gluon-q8_0.json"))
bad = {k: v for k, v in r["check"].items() if v["nan"] or v["vs_ref"] > 2 * v["decode_vs_ref"] + 1e-4}
print("check cases", len(r["check"]), "bad", bad)
for row in r["rows"]:
    for c in row["configs"]:
        print(row["batch"], row["tokens"], c["variant"], c["per_sm"], f'{c["seconds"] * 1e6:.1f}us', f'{c["vs_sdpa"]:.2f}x', f'{c["fraction_of_read_bw"]:.0%}', f'{c["diff_vs_decode"]:.1e}', "decode", f'{row["decode_seconds"]*1e6:.1f}us')
PY
