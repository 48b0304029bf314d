#!/usr/bin/env bash
# One device call: Nsight Compute on the KIVI Gluon decode kernel as decode launches it since
# v67 (kivi2: V_AFTER and K_SUB; kivi4: V_AFTER) at B=8 × 131,072 tokens
# (bench/profile_decode.py; the second launch), with what the warps stall on.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis"
for fmt in kivi2 kivi4; do
  {
    cat "$OUT/gpu.log"
    echo "=== $fmt decode: ncu --clock-control none --kernel-name regex:kivi2_swapped_kernel --launch-skip 1 --launch-count 1 $SECTIONS --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio python3 bench/profile_decode.py $fmt --tokens 131072"
    timeout 110 ncu --clock-control none --kernel-name regex:kivi2_swapped_kernel --launch-skip 1 \
      --launch-count 1 $SECTIONS --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      python3 bench/profile_decode.py $fmt --tokens 131072 2>&1 | grep -v "^==PROF==\|Warning"
  } > "$OUT/ncu-$fmt-v67.txt" 2>&1
  grep -n "stalled_.*ratio\|Duration\|DRAM Throughput\|Registers Per\|Issued Warp Per\|No Eligible\|Eligible Warps\|Executed Ipc A" "$OUT/ncu-$fmt-v67.txt" | awk '$NF != "0" && $NF != "0.00"' | cut -c1-150 | head -40
done
ls "$OUT"
