#!/usr/bin/env bash
# Device calls for nvfp4's table-free unpacking (NVFP4_ASM: each nibble's bits laid in
# float16's, the values times 2⁻¹⁴ times the block scale times 2⁷; V's global scale applied to
# the output once). PART=first: small block scales against the reference
# (bench/probes/nvfp4_scales.py), the swapped products against decode's default
# (bench/probes/swapped.py), the decode benchmark for nvfp4 and the launch tables' check.
# PART=plan: nvfp4's launches again (bench/probes/int_keys.py under --configs: tokens a
# program, warps, stages, query rows, registers, programs a multiprocessor), bench/verify.py's
# nvfp4 plan (Qwen3-32B 32k × 4), and the byte-reads probe (mixed formats in 256-lane heads,
# nvfp4 among them). PART=swapped: after nvfp4 joined SWAPPED (64-token programs), the small
# scales again, the decode benchmark for nvfp4, the launch check and the nvfp4 plan.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
if [ "${PART:-first}" = first ]; then
  echo "== small block scales"
  timeout 60 python3 bench/probes/nvfp4_scales.py --out "$OUT" 2>&1 | grep "^{\|Error"
  echo "== swapped against the default"
  timeout 200 python3 bench/probes/swapped.py --formats nvfp4 \
    --shapes 1x131072,8x131072,1x32768,1x4096 \
    --configs 32/1/3/8/0/12,32/1/3/8/128/16,16/1/3/8/128/16,16/1/3/8/0/16 \
    --out "$OUT/swapped" 2>&1 | grep "^nvfp4\|Error"
  echo "== decode nvfp4"
  timeout 200 python3 bench/decode.py --formats nvfp4 --out "$OUT" 2>&1 | grep -v Warning \
    | grep "^nvfp4\|correct\|bytes_per_s"
  echo "== launch check"
  timeout 150 python3 bench/launch_check.py --workers 12 --out "$OUT" 2>&1 | tail -2
  exit
fi
if [ "${PART}" = swapped ]; then
  echo "== small block scales"
  timeout 60 python3 bench/probes/nvfp4_scales.py --out "$OUT" 2>&1 | grep "^{\|Error"
  echo "== decode nvfp4"
  timeout 200 python3 bench/decode.py --formats nvfp4 --out "$OUT" 2>&1 | grep -v Warning \
    | grep "^nvfp4\|bytes_per_s"
  echo "== launch check"
  timeout 150 python3 bench/launch_check.py --workers 12 --out "$OUT" 2>&1 | tail -2
  echo "== verify plan 7 (Qwen3-32B nvfp4 32k x 4)"
  mkdir -p "$OUT/verify7"
  timeout 150 python3 bench/verify.py --start 7 --stop 8 --out "$OUT/verify7" 2>&1 \
    | grep -v Warning | head -3
  exit
fi
echo "== nvfp4 launches"
timeout 270 python3 bench/probes/int_keys.py --formats nvfp4 --base "" --variant "" \
  --configs 64/1/2/4,32/1/3/4,32/1/3/8,32/1/2/4,64/1/2/8,32/1/3/4/168/12,32/1/3/8/168/12,64/1/3/4 \
  --shapes 1x131072,8x131072,1x32768,64x32768 --out "$OUT/launches" 2>&1 \
  | grep "^nvfp4\|^check\|Error"
echo "== verify plan 7 (Qwen3-32B nvfp4 32k x 4)"
mkdir -p "$OUT/verify7"
timeout 150 python3 bench/verify.py --start 7 --stop 8 --out "$OUT/verify7" 2>&1 \
  | grep -v Warning | head -3
echo "== byte reads, decode's choice, mixed formats in 256-lane heads"
timeout 120 python3 bench/probes/byte_reads.py --out "$OUT" 2>&1 | grep "^{\|Error"
