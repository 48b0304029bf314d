#!/usr/bin/env bash
# One device call on a two-GPU machine: bench/decode.py over all formats (kivi2 and kivi4 one
# on each GPU) in two halves side by side, then on GPU 0 the append sweep and on GPU 1 kvplan measure for a KIVI cache (the paged
# KIVI kernels) and a hybrid model's tbq4 cache (sliding-window and linear-attention layers
# beside full ones).
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 360 python3 bench/decode.py --formats f16,bf16,fp8_pth,q8_0,kivi2 --out "$OUT/a"
  timeout 150 python3 bench/append_sweep.py --out "$OUT/a"
) > "$OUT/a.log" 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 330 python3 bench/decode.py --formats q4_0,tbq4,tbq3,nvfp4,kivi4 --out "$OUT/b"
  timeout 120 python3 -m app.cli measure llama-3.1-8b --kv kivi2 --ctx 8k --seqs 2 --layers 4 --json \
    > "$OUT/measure-kivi2.json"
  timeout 60 python3 -m app.cli measure qwen3.5-27b --kv tbq4 --ctx 128k --seqs 2 --json \
    > "$OUT/measure-tbq4.json"
) > "$OUT/b.log" 2>&1 &
wait
cat "$OUT/gpu.log"
for x in a b; do grep -v "^{\|^correctness" "$OUT/$x.log" | tail -n 40; done
for m in kivi2 tbq4; do python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in list(d)[:12]})" "$OUT/measure-$m.json" | cut -c1-900; done
