#!/usr/bin/env bash
# One device call after K and V of different widths entered the kernels: MiMo-V2-Flash's
# K 192 / V 128 layers against the reference in every format (bench/probes/kvwidth.py), the
# catalog check for MiMo-V2-Flash whole in every format, kvplan measure of the whole model at a
# long context, the launch tables' check and KIVI's checks (equal widths must be unchanged),
# and the quick decode rows (B=1 32k, B=8 128k) to compare with decode-h200-v19.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== kvwidth probe"
timeout 150 python3 bench/probes/kvwidth.py --out "$OUT" 2>&1 | tail -25
echo "== catalog check, mimo-v2-flash"
timeout 120 python3 bench/catalog_check.py --models mimo-v2-flash --layers 1000 --workers 10 \
  --per-process 12 --out "$OUT/catalog-mimo" 2>&1 | tail -5
echo "== measure"
for a in "--kv q8_0 --ctx 128k --seqs 2" "--kv tbq4 --ctx 64k --seqs 4"; do
  echo "-- mimo-v2-flash $a"
  timeout 150 python3 -m app.cli measure mimo-v2-flash $a --steps 5 --json | tr -d '\n'; echo
done > "$OUT/mimo-measure.log" 2>&1
cat "$OUT/mimo-measure.log" | cut -c1-400
echo "== launch check"
timeout 200 python3 bench/launch_check.py --workers 12 --out "$OUT" 2>&1 | tail -6
echo "== kivi check"
timeout 120 python3 bench/kivi_check.py --check-only --out "$OUT" 2>&1 | tail -6
echo "== decode quick"
timeout 200 python3 bench/decode.py --quick --formats f16,fp8_pth,q8_0,q4_0,tbq4,kivi2 --out "$OUT" 2>&1 | tail -22
