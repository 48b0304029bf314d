#!/usr/bin/env bash
# One device call: kvplan measure for a model read from a GGUF header, beside the same model
# from its config.json. The GGUF is written here with Qwen3.5-27B's architecture numbers and a
# sparse data section (tests/ggufmake.py), so the cache kvplan allocates, fills and times is the
# one it predicts from the file's header alone.
set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh
python3 - <<'EOF'
import os, sys
sys.path.insert(0, "tests")
from pathlib import Path
from ggufmake import dense_model, write_gguf
a = "qwen35"
meta, tensors = dense_model(a, layers=65, hidden=5120, heads=24, kv_heads=4, head_dim=256,
                            ffn=17408, vocab=248320, ctx=262144, extra={
    f"{a}.ssm.conv_kernel": 4, f"{a}.ssm.state_size": 128, f"{a}.ssm.group_count": 16,
    f"{a}.ssm.time_step_rank": 48, f"{a}.ssm.inner_size": 48 * 128,
    f"{a}.full_attention_interval": 4, f"{a}.nextn_predict_layers": 1})
write_gguf(Path(os.environ["OUT"]) / ".." / "Qwen3.5-27B-Q4_K_M.gguf", meta, tensors)
EOF
GGUF="$OUT/../Qwen3.5-27B-Q4_K_M.gguf"
for model in "$GGUF" qwen3.5-27b; do
  for plan in "--kv tbq4 --ctx 128k --seqs 2" "--kv q8_0 --ctx 32k --seqs 4"; do
    echo "== $(basename "$model") $plan"
    timeout 120 python3 -m app.cli measure "$model" $plan --json | tr -d '\n'; echo
  done
done > "$OUT/gguf-measure.log" 2>&1
rm -f "$GGUF"
cat "$OUT/gpu.log" "$OUT/gguf-measure.log" | cut -c1-600
