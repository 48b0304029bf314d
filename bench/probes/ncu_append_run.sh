#!/usr/bin/env bash
# One device call: Nsight Compute on the append kernels (one launch a call since v62) of
# tbq4, tbq3 and q4_0 (16,384 new tokens, bench/profile_decode.py --append; the second call's
# launch): throughput, occupancy, issue rate and the warps' stall reasons (cycles stalled on
# each, per issued instruction), into ncu-append.txt.
set -u
bash bench/gpu_env.sh
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
STALLS="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
{
  cat "$OUT/gpu.log"
  for fmt in ${FORMATS:-tbq4 tbq3 q4_0}; do
    echo "=== $fmt append: ncu --clock-control none --kernel-name regex:append_kernel --launch-skip 1 --launch-count 1 $SECTIONS $STALLS python3 bench/profile_decode.py --append $fmt"
    timeout 150 ncu --clock-control none --kernel-name regex:append_kernel --launch-skip 1 \
      --launch-count 1 $SECTIONS $STALLS python3 bench/profile_decode.py --append "$fmt" 2>&1 \
      | grep -v "^==PROF==\|Warning"
  done
} > "$OUT/ncu-append.txt" 2>&1
grep -n "===\|Duration\|Registers Per\|Achieved Occupancy\|Issued Warp Per\|No Eligible\|Eligible Warps\|Warp Cycles Per Issued\|stalled" "$OUT/ncu-append.txt" | cut -c1-200 | head -150
