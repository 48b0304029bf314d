#!/usr/bin/env bash
# One device call at KIVI's append v38 (the codes' mask and clamp dropped; the next channel
# blocks' rows loaded while a block is quantized, three in flight): the append probe, then the
# same probe timing two other flush kernels in the same call, each written first as a module
# of its own under bench/probes (run if present):
#   kivi_flush_v37.py: git show 465ee62:kvcore/kernels/kivi_triton.py \
#     | sed 's/^from .triton_ops import/from kvcore.kernels.triton_ops import/'
#   kivi_flush_stages4.py: this commit's kivi_triton.py through the same sed, with
#     num_stages=STAGES replaced by num_stages=4 (four blocks in flight: the whole row)
# then the decode benchmark for kivi2 and kivi4 (its append column, its GPU check of chunked
# appends).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
echo "== kivi append"
timeout 200 python3 bench/probes/kivi_append.py --out "$OUT" 2>&1 | grep -v Warning \
  | cut -c1-1500
for old in kivi_flush_v37 kivi_flush_stages4; do
  if [ -f "bench/probes/$old.py" ]; then
    echo "== kivi append, $old"
    timeout 200 python3 bench/probes/kivi_append.py --old "probes.$old" --out "$OUT" 2>&1 \
      | grep -v Warning | cut -c1-1500
  fi
done
echo "== decode kivi2, kivi4"
timeout 300 python3 bench/decode.py --formats kivi2,kivi4 --out "$OUT" 2>&1 | grep -v Warning \
  | grep "^kivi\|bytes_per_s\|Error\|error"
ls "$OUT"
