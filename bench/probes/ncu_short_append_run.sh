#!/usr/bin/env bash
# One device call: Nsight Compute on the decode benchmark's B=1 4k append (4,096 new tokens,
# bench/probes/short_append_profile.py; the second launch) of kivi2, kivi4 and q4_0:
# duration, throughput, occupancy, issue rate, the warps' stall reasons (cycles stalled on
# each, per issued instruction) and the memory tables, into ncu-short-append.txt.
set -u
bash bench/gpu_env.sh
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables"
STALLS="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__cycles_active.avg,sm__cycles_elapsed.avg,gpu__time_duration.sum"
{
  cat "$OUT/gpu.log"
  for fmt in ${FORMATS:-kivi2 kivi4 q4_0}; do
    case $fmt in kivi*) k=kivi_flush_kernel ;; *) k=append_kernel ;; esac
    echo "=== $fmt: ncu --clock-control none --kernel-name regex:$k --launch-skip 1 --launch-count 1 $SECTIONS $STALLS python3 bench/probes/short_append_profile.py $fmt"
    timeout 150 ncu --clock-control none --kernel-name regex:$k --launch-skip 1 \
      --launch-count 1 $SECTIONS $STALLS python3 bench/probes/short_append_profile.py "$fmt" 2>&1 \
      | grep -v "^==PROF==\|Warning"
  done
} > "$OUT/ncu-short-append.txt" 2>&1
grep -n "===\|Duration\|DRAM Throughput\|Registers Per\|Achieved Occupancy\|Theoretical Occupancy\|Block Limit\|Grid Size\|Waves Per\|Issued Warp Per\|No Eligible\|Eligible Warps\|Warp Cycles Per Issued\|stalled.*ratio\|Mem Busy\|Max Bandwidth\|L2 Hit\|L1/TEX Hit\|Executed Ipc\|cycles_active\|cycles_elapsed" "$OUT/ncu-short-append.txt" | cut -c1-160 | head -230
