#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/decode.py over all formats (kivi2 and kivi4 one
# on each GPU) in two halves side by side; then on GPU 0 the append sweep and the rotated
# formats' persistent launches (into c/) and the four KIVI plans of bench/verify.py through
# kvplan measure (their JSON in a.log), and on GPU 1 kvplan measure for a hybrid model's
# tbq4 cache (sliding-window and linear-attention layers beside full ones) and launch_check
# (every table launch against the reference, into c/).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
mkdir -p "$OUT/c"
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 330 python3 bench/decode.py --formats f16,bf16,fp8_pth,q8_0,kivi2 --out "$OUT/a"
  timeout 150 python3 bench/append_sweep.py --out "$OUT/a"
  timeout 60 python3 bench/append_sweep.py --formats tbq4,tbq3 --out "$OUT/c" \
    --configs 64/4/2/1/255,64/4/3/1/168,64/4/4/1/128,64/4/3/2/168
  # the four KIVI plans of bench/verify.py (bytes, allocator, driver, decode), JSON in the log
  for plan in "llama-3.1-70b --kv kivi2 --ctx 8k --seqs 1 --layers 4" \
      "qwen3-8b --kv kivi4 --ctx 4k --seqs 2 --layers 8" \
      "deepseek-v2-lite-chat --kv kivi2 --ctx 8k --seqs 1 --layers 4" \
      "phi-3-mini-4k-instruct --kv kivi4 --ctx 4k --seqs 2 --layers 8"; do
    # shellcheck disable=SC2086
    timeout 60 python3 -m app.cli measure $plan --json | tr -d '\n'; echo
  done
) > "$OUT/a.log" 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 330 python3 bench/decode.py --formats q4_0,tbq4,tbq3,nvfp4,kivi4 --out "$OUT/b"
  timeout 60 python3 -m app.cli measure qwen3.5-27b --kv tbq4 --ctx 128k --seqs 2 --json
  timeout 150 python3 bench/launch_check.py --workers 14 --out "$OUT/c"
) > "$OUT/b.log" 2>&1 &
wait
cat "$OUT/gpu.log"
for x in a b; do grep -v "^{\|^correctness" "$OUT/$x.log" | tail -n 40 | cut -c1-400; done
