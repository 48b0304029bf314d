#!/usr/bin/env bash
# One device call: kvplan measure over the layer kinds of the newer architectures, each model
# whole (every layer) at a long context: the DeepSeek Sparse Attention latent and indexer keys
# (DeepSeek-V3.2, GLM-5.2), DeepSeek-V4's window, compressed entries, index keys and compressor
# state, MiniMax-M3's index keys, Gemma 4's global heads and KV-shared layers, Nemotron 3's
# Mamba-2 state, Nemotron-NAS's per-layer attention, Kimi-K3's MLA + KDA, Step-3.7's sliding
# layers. Each run prints one JSON line: prediction, tensor bytes, allocator and driver bytes.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
run() {
  echo "== $*"
  timeout 240 python3 -m app.cli measure "$@" --steps 5 --json | tr -d '\n'; echo
}
{
  run deepseek-v3.2 --kv q8_0 --ctx 128k --seqs 2
  run glm-5.2 --kv tbq4 --ctx 128k --seqs 2
  run deepseek-v4-flash --kv q8_0 --ctx 256k --seqs 4
  run deepseek-v4-pro --kv tbq4 --ctx 128k --seqs 2
  run minimax-m3 --kv fp8_pth --ctx 64k --seqs 2
  run gemma-4-31b-it --kv q4_0 --ctx 128k --seqs 2
  run gemma-4-26b-a4b --kv f16 --ctx 64k --seqs 4
  run nemotron-3-super-120b-a12b --kv q8_0 --ctx 128k --seqs 8
  run llama-3.3-nemotron-super-49b --kv nvfp4 --ctx 64k --seqs 2
  run kimi-k3 --kv q8_0 --ctx 128k --seqs 2
  run step-3.7-flash --kv tbq3 --ctx 64k --seqs 4
} > "$OUT/models26-measure.log" 2>&1
cat "$OUT/gpu.log"
python3 - <<'EOF'
import json, os
for line in open(os.path.join(os.environ["OUT"], "models26-measure.log")):
    if line.startswith("=="):
        head = line.strip()
        continue
    try:
        d = json.loads(line)
    except ValueError:
        print(head, "|", line.strip()[:300])
        continue
    same = (d["predicted_bytes"] == d["allocated_bytes"]
            and d["allocator_bytes"] == d["predicted_allocator_bytes"])
    print(head, "| predicted", d["predicted_bytes"], "tensors", d["allocated_bytes"],
          "allocator", d["allocator_bytes"], "predicted allocator",
          d["predicted_allocator_bytes"], "driver", d["driver_bytes"],
          "layers", d["layers_measured"], "/", d["layers_total"], "equal" if same else "DIFFERENT")
EOF
