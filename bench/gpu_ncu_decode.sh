#!/usr/bin/env bash
# Nsight Compute on the decode split kernel of each quantized format at its default launch
# (bench/profile_decode.py's shape: GQA 32/8, head_dim 128, B=8 × 32,768 tokens; the second
# launch of each format): throughput, occupancy, issue rate and what the warps stall on.
set -u
bash bench/gpu_env.sh
FORMATS=${FORMATS:-f16 fp8_pth q8_0 q4_0 tbq4 tbq3 nvfp4}
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
{
  cat "$OUT/gpu.log"
  echo "command: ncu --clock-control none --kernel-name regex:decode_split_kernel --launch-skip 1 --launch-count 1 $SECTIONS python3 bench/profile_decode.py FMT (per format)"
  for fmt in $FORMATS; do
    echo "=== $fmt"
    timeout 120 ncu --clock-control none --kernel-name regex:decode_split_kernel --launch-skip 1 \
      --launch-count 1 $SECTIONS python3 bench/profile_decode.py "$fmt" 2>&1 \
      | grep -v "^==PROF==\|Warning"
  done
} > "$OUT/ncu-decode.txt" 2>&1
grep -n "===\|Duration\|DRAM Throughput\|Registers Per\|Achieved Occupancy\|Issued Warp Per\|No Eligible\|Active Warps Per Scheduler\|Eligible Warps\|Executed Ipc A\|cycles being stalled" "$OUT/ncu-decode.txt" | cut -c1-260 | head -120
