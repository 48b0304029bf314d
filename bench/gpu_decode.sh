#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/decode.py over all formats, split in two halves
# that run side by side (GPU 0: f16, bf16, fp8_pth, q8_0; GPU 1: the 4- and 3-bit formats),
# then the launch-configuration sweep (bench/decode_sweep.py) likewise split (with the K-only /
# V-only runs for the 4- and 3-bit formats), then an Nsight Compute profile on GPU 0.
# Results land in $OUT/a and $OUT/b (decode.json, sweep.json), the logs and ncu.txt in $OUT.
set -u
export PYTHONUNBUFFERED=1
LIMIT=${LIMIT:-540}
bash bench/gpu_env.sh
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 300 python3 bench/decode.py --formats f16,bf16,fp8_pth,q8_0 --out "$OUT/a"
  timeout 150 python3 bench/decode_sweep.py --no-split --formats f16,fp8_pth,q8_0 --out "$OUT/a"
  timeout 120 ncu --clock-control none --kernel-name regex:decode_split_kernel --launch-count 8 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    python3 bench/profile_decode.py f16 q8_0 q4_0 tbq4 > "$OUT/ncu.txt" 2>&1
) > "$OUT/a.log" 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 250 python3 bench/decode.py --formats q4_0,tbq4,tbq3,nvfp4 --out "$OUT/b"
  timeout 280 python3 bench/decode_sweep.py --formats q4_0,tbq4,tbq3,nvfp4 --out "$OUT/b"
) > "$OUT/b.log" 2>&1 &
wait
cat "$OUT/gpu.log"
for x in a b; do grep -v "^{\|^correctness" "$OUT/$x.log" | tail -n 60; done
grep -c "decode_split_kernel" "$OUT/ncu.txt"
