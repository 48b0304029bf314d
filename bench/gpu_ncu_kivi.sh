#!/usr/bin/env bash
# Nsight Compute on KIVI's flush kernel (16,384 new tokens into an empty sequence; the second
# launch of each format): throughput, occupancy, issue and stall statistics.
set -u
bash bench/gpu_env.sh
cat "$OUT/gpu.log"
{
  cat "$OUT/gpu.log"
  echo "command: ncu --clock-control none --kernel-name regex:kivi_flush_kernel --launch-skip 1 --launch-count 1 (per format) --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis python3 bench/profile_decode.py --append FMT"
  for fmt in kivi2 kivi4; do
    echo "=== $fmt"
    timeout 200 ncu --clock-control none --kernel-name regex:kivi_flush_kernel --launch-skip 1 \
      --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      python3 bench/profile_decode.py --append $fmt 2>&1 | grep -v "^==PROF==\|Warning"
  done
} > "$OUT/ncu-kivi-flush.txt" 2>&1
grep -n "Duration\|DRAM Throughput\|Memory Throughput\|Registers\|Achieved Occupancy\|Theoretical Occupancy\|Issued Warp\|No Eligible\|Compute (SM)\|Block Limit\|Waves\|Stall\|cycles being stalled" "$OUT/ncu-kivi-flush.txt" | head -80
