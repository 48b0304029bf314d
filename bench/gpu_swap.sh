#!/usr/bin/env bash
# Device calls after SWAPPED (tbq4 at any rows and q4_0 from 32 rows decode with their
# products swapped). PART=decode (the first call): the decode benchmark for q4_0 and tbq4
# (every shape of bench/decode.py) and the launch tables' check. PART=checks (the second):
# the swapped defaults with and without programmatic dependent launches; the two
# bench/verify.py plans the swap changes (Qwen3-8B tbq4 128k × 4, Llama-4-Scout tbq4 1M × 1);
# tbq4's swapped decode reading bytes against words; decode's tbq3 byte reads in 16-token
# tiles on the GPU against the reference. PART=detail (a third): byte reads against word reads
# under several launches (bench/probes/byte_reads.py); q4_0 at B=8 128k, decode's swapped
# launch (its registers) and the probe's kernel in one call (the probe had its own kernel until
# commit 07badd5; it now times decode(swap=True), so the two sides are one kernel since). PART=final: the decode benchmark
# for tbq4 (swapped, reading bytes), the launch check, the two verify plans again, and the
# byte-reads probe with decode's own choice of read and mixed formats in 256-lane heads.
# PART=tbq3: after tbq3 joined SWAPPED (reading words), its decode benchmark and the launch
# check.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
# the two bench/verify.py plans the swap changes, each within $1 seconds
verify_plans() {
  echo "== verify plans 5 and 22"
  mkdir -p "$OUT/verify5" "$OUT/verify22"
  timeout "$1" python3 bench/verify.py --start 5 --stop 6 --out "$OUT/verify5" 2>&1 \
    | grep -v Warning | head -3
  timeout "$1" python3 bench/verify.py --start 22 --stop 23 --out "$OUT/verify22" 2>&1 \
    | grep -v Warning | head -3
}
# the decode benchmark for the formats $1 within $2 seconds, then the launch tables' check
decode_and_check() {
  echo "== decode $1"
  timeout "$2" python3 bench/decode.py --formats "$1" --out "$OUT" 2>&1 | grep -v Warning \
    | grep "^q4\|^tbq\|correct\|bytes_per_s"
  echo "== launch check"
  timeout 150 python3 bench/launch_check.py --workers 12 --out "$OUT" 2>&1 | tail -2
}
if [ "${PART:-decode}" = decode ]; then
  decode_and_check q4_0,tbq4 400
  exit
fi
if [ "${PART}" = tbq3 ]; then
  decode_and_check tbq3 200
  exit
fi
if [ "${PART}" = final ]; then
  decode_and_check tbq4 200
  verify_plans 100
  echo "== byte reads, decode's choice, mixed formats in 256-lane heads"
  timeout 120 python3 bench/probes/byte_reads.py --out "$OUT" 2>&1 | grep "^{\|Error"
  exit
fi
if [ "${PART}" = detail ]; then
  echo "== byte reads against word reads"
  timeout 150 python3 bench/probes/byte_reads.py --out "$OUT" 2>&1 | grep "^{\|Error"
  echo "== q4_0 B=8 128k: decode's swapped launch and the probe's kernel, registers"
  timeout 120 python3 bench/probes/int_keys.py --formats q4_0 --base "" --variant swap=1 \
    --configs 32/1/3/8/128/16 --shapes 8x131072 --out "$OUT/regs" 2>&1 | grep "^q4\|Error"
  timeout 120 python3 bench/probes/swapped.py --formats q4_0 --shapes 8x131072 \
    --configs 32/1/3/8/128/16 --out "$OUT/probe" 2>&1 | grep "^q4_0 B\|Error"
  exit
fi
echo "== swapped defaults without programmatic launches (pdl=0)"
timeout 170 python3 bench/probes/int_keys.py --formats q4_0,tbq4 --base "" --variant pdl=0 \
  --configs "" --shapes 8x131072,8x32768,1x4096,1x131072 --out "$OUT/pdl" 2>&1 \
  | grep "^q4\|^tbq\|Error"
verify_plans 150
echo "== tbq4 swapped: words (default) against bytes"
timeout 150 python3 bench/probes/int_keys.py --formats tbq4 --base swap=1 \
  --variant swap=1,words=0 --configs "" --shapes 1x131072,8x131072 \
  --out "$OUT/words" 2>&1 | grep "^tbq\|^check\|^read\|Error"
echo "== tbq3 byte reads, 16-token tiles"
timeout 60 python3 bench/probes/int_keys.py --formats tbq3 --base words=1 --variant words=0 \
  --configs "" --shapes "" --out "$OUT/tbq3" 2>&1 | grep "^check\|Error"
