#!/usr/bin/env bash
# One device call: Nsight Compute on kivi2's Gluon decode kernel (kivi2_swapped_kernel) at B=8 ×
# 131,072 tokens (bench/profile_decode.py; the second launch), with what the warps stall on,
# into ncu-kivi-gluon.txt; then the Gluon kernel against the Triton kernel at the decode
# benchmark's shapes (bench/probes/gluon_kivi.py).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis"
{
  cat "$OUT/gpu.log"
  echo "=== kivi2 decode: ncu --clock-control none --kernel-name regex:kivi2_swapped_kernel --launch-skip 1 --launch-count 1 $SECTIONS --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio python3 bench/profile_decode.py kivi2 --tokens 131072"
  timeout 150 ncu --clock-control none --kernel-name regex:kivi2_swapped_kernel --launch-skip 1 \
    --launch-count 1 $SECTIONS --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    python3 bench/profile_decode.py kivi2 --tokens 131072 2>&1 | grep -v "^==PROF==\|Warning"
} > "$OUT/ncu-kivi-gluon.txt" 2>&1
grep -n "stalled_.*ratio\|Duration\|DRAM Throughput\|Registers Per\|Achieved Occupancy\|Issued Warp Per\|No Eligible\|Eligible Warps\|Executed Ipc A\|L1/TEX Hit\|Mem Busy\|Max Bandwidth" "$OUT/ncu-kivi-gluon.txt" | awk '$NF != "0" && $NF != "0.00"' | cut -c1-160 | head -60
timeout 300 python3 bench/probes/gluon_kivi.py --out "$OUT" --no-check "$@" 2>&1 | grep -v Warn | cut -c1-900
ls "$OUT"
