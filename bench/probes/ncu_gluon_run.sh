#!/usr/bin/env bash
# One device call: Nsight Compute on the Gluon decode kernel (q4_0_swapped_kernel) of q4_0,
# nvfp4, tbq4 and tbq3 at B=8 × 131,072 tokens (bench/profile_decode.py; the second launch of
# each), and on the rotated append (tbq4, tbq3: 16,384 new tokens): throughput, occupancy,
# issue rate and what the warps stall on, into ncu-gluon.txt.
set -u
bash bench/gpu_env.sh
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis"
{
  cat "$OUT/gpu.log"
  for fmt in ${FORMATS:-q4_0 nvfp4 tbq4 tbq3}; do
    echo "=== $fmt decode: ncu --clock-control none --kernel-name regex:q4_0_swapped_kernel --launch-skip 1 --launch-count 1 $SECTIONS python3 bench/profile_decode.py $fmt --tokens 131072"
    timeout 150 ncu --clock-control none --kernel-name regex:q4_0_swapped_kernel --launch-skip 1 \
      --launch-count 1 $SECTIONS python3 bench/profile_decode.py "$fmt" --tokens 131072 2>&1 \
      | grep -v "^==PROF==\|Warning"
  done
  for fmt in ${APPEND:-tbq4 tbq3}; do
    # one launch an append since v62 (two before: --launch-skip 2 in the v60 run)
    echo "=== $fmt append: ncu --clock-control none --kernel-name regex:rotated_append_kernel --launch-skip 1 --launch-count 1 $SECTIONS python3 bench/profile_decode.py --append $fmt"
    timeout 150 ncu --clock-control none --kernel-name regex:rotated_append_kernel --launch-skip 1 \
      --launch-count 1 $SECTIONS python3 bench/profile_decode.py --append "$fmt" 2>&1 \
      | grep -v "^==PROF==\|Warning"
  done
} > "$OUT/ncu-gluon.txt" 2>&1
grep -n "===\|Duration\|DRAM Throughput\|Registers Per\|Achieved Occupancy\|Issued Warp Per\|No Eligible\|Eligible Warps\|Executed Ipc A\|cycles being stalled\|L1/TEX Hit\|Mem Busy\|Max Bandwidth" "$OUT/ncu-gluon.txt" | cut -c1-240 | head -150
