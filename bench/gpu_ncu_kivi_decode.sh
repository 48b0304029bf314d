#!/usr/bin/env bash
# Nsight Compute on KIVI's decode kernel at its default launch (GQA 32/8, head_dim 128, B=8 ×
# 131,072 tokens; the second launch of each format), beside q4_0's Gluon kernel on the same
# shape: throughput, occupancy, issue rate and what the warps stall on.
set -u
bash bench/gpu_env.sh
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
{
  cat "$OUT/gpu.log"
  echo "command: ncu --clock-control none --kernel-name regex:KERNEL --launch-skip 1 --launch-count 1 $SECTIONS python3 bench/profile_decode.py FMT --tokens 131072 (per format)"
  for pair in kivi2:kivi_decode_kernel kivi4:kivi_decode_kernel q4_0:q4_0_swapped_kernel; do
    fmt=${pair%%:*}; kern=${pair#*:}
    echo "=== $fmt ($kern)"
    timeout 150 ncu --clock-control none --kernel-name regex:$kern --launch-skip 1 \
      --launch-count 1 $SECTIONS python3 bench/profile_decode.py "$fmt" --tokens 131072 2>&1 \
      | grep -v "^==PROF==\|Warning"
  done
} > "$OUT/ncu-kivi-decode.txt" 2>&1
grep -n "===\|Duration\|DRAM Throughput\|L1/TEX Cache Throughput\|Registers Per\|Achieved Occupancy\|Issued Warp Per\|No Eligible\|Active Warps Per Scheduler\|Eligible Warps\|Executed Ipc A\|cycles being stalled\|Block Limit Reg" "$OUT/ncu-kivi-decode.txt" | cut -c1-260 | head -90
