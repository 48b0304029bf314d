"""Golden per-model figures from the bundled real configs, the arithmetic written beside each.

bytes/token: f16 K + V per token of one sequence, all self-attention layers (short context);
marginal: past every window (full + MLA layers only); state: recurrent bytes per sequence, f32.
"""

import pytest

from kvcore import CacheOptions, bytes_per_token, cache_size, load_model, marginal_bytes_per_token

F16 = 2
F32 = 4

GOLDEN = [
    # id, bytes/token, marginal bytes/token, state bytes per sequence
    ("llama-3.1-8b", 32 * 8 * (128 + 128) * F16, 32 * 8 * 256 * F16, 0),
    ("llama-3.1-70b", 80 * 8 * 256 * F16, 80 * 8 * 256 * F16, 0),
    ("llama-3.1-405b", 126 * 8 * 256 * F16, 126 * 8 * 256 * F16, 0),
    ("llama-3.2-1b-instruct", 16 * 8 * (64 + 64) * F16, 16 * 8 * 128 * F16, 0),
    ("llama-3.2-3b-instruct", 28 * 8 * 256 * F16, 28 * 8 * 256 * F16, 0),
    # Mllama: 40 layers of which 8 are cross-attention (they cache image tokens, not text)
    ("llama-3.2-11b-vision-instruct", 32 * 8 * 256 * F16, 32 * 8 * 256 * F16, 0),
    # Llama-4: 36 chunked-local layers (8192-token chunks) + 12 global NoPE layers
    ("llama-4-scout-17b-16e-instruct", 48 * 8 * 256 * F16, 12 * 8 * 256 * F16, 0),
    # Mistral-7B-v0.1: every layer slides over 4096 tokens, so nothing grows past the window
    ("mistral-7b-v0.1", 32 * 8 * 256 * F16, 0, 0),
    ("mistral-7b-instruct-v0.3", 32 * 8 * 256 * F16, 32 * 8 * 256 * F16, 0),
    # EXAONE-4.0: layer_types gives 3 sliding (4096-token window) : 1 full, 64 layers
    ("exaone-4.0-32b", 64 * 8 * 256 * F16, 16 * 8 * 256 * F16, 0),
    # OLMo-3: layer_types gives 3 sliding (4096-token window) : 1 full, 64 layers
    ("olmo-3.1-32b-instruct", 64 * 8 * 256 * F16, 16 * 8 * 256 * F16, 0),
    # Devstral Small 2 (Mistral3 wrapper): the text_config's 40 layers, 8 KV heads × 128
    ("devstral-small-2-24b-instruct", 40 * 8 * 256 * F16, 40 * 8 * 256 * F16, 0),
    # LFM2: 6 attention layers (8 KV heads × 64) and 10 gated short-conv layers, each keeping
    # the last conv_L_cache − 1 = 2 inputs of its 2048 channels
    ("lfm2.5-vl-1.6b", 6 * 8 * 128 * F16, 6 * 8 * 128 * F16, 10 * 2 * 2048 * F32),
    # Qwen3.5-9B: 8 full layers (4 KV heads × 256) + 24 Gated DeltaNet layers, each
    # 32 value heads × 128 × 128 delta state + 3 × (2·16·128 + 32·128) conv state
    ("qwen3.5-9b", 8 * 4 * 512 * F16, 8 * 4 * 512 * F16,
     24 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * F32),
    # Mistral-Nemo: head_dim 128 given explicitly, not hidden/heads = 5120/32 = 160
    ("mistral-nemo-instruct-2407", 40 * 8 * 256 * F16, 40 * 8 * 256 * F16, 0),
    ("mixtral-8x7b-v0.1", 32 * 8 * 256 * F16, 32 * 8 * 256 * F16, 0),
    ("mixtral-8x22b-v0.1", 56 * 8 * 256 * F16, 56 * 8 * 256 * F16, 0),
    # Qwen2.5 sets sliding_window but use_sliding_window is false: all full attention
    ("qwen2.5-7b", 28 * 4 * 256 * F16, 28 * 4 * 256 * F16, 0),
    ("qwen2.5-72b", 80 * 8 * 256 * F16, 80 * 8 * 256 * F16, 0),
    ("qwen2.5-0.5b", 24 * 2 * (64 + 64) * F16, 24 * 2 * 128 * F16, 0),
    ("qwen2.5-vl-7b-instruct", 28 * 4 * 256 * F16, 28 * 4 * 256 * F16, 0),
    # Qwen3: head_dim 128 given explicitly (hidden/heads would be 4096/32 = 128 for 8B, but
    # 5120/64 = 80 for 32B: the explicit field wins)
    ("qwen3-8b", 36 * 8 * 256 * F16, 36 * 8 * 256 * F16, 0),
    ("qwen3-32b", 64 * 8 * 256 * F16, 64 * 8 * 256 * F16, 0),
    ("qwen3-30b-a3b", 48 * 4 * 256 * F16, 48 * 4 * 256 * F16, 0),
    ("qwen3-235b-a22b", 94 * 4 * 256 * F16, 94 * 4 * 256 * F16, 0),
    # Qwen3.5 MoE: 10 of 40 layers full attention, 2 KV heads × 256; 30 Gated DeltaNet layers
    ("qwen3.5-35b-a3b", 10 * 2 * 512 * F16, 10 * 2 * 512 * F16,
     30 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * F32),
    ("qwen3.5-27b", 16 * 4 * 512 * F16, 16 * 4 * 512 * F16,
     48 * (48 * 128 * 128 + 3 * (2 * 16 * 128 + 48 * 128)) * F32),
    # Gemma-2: alternating 4096-token windows and global layers, head_dim 256 (given)
    ("gemma-2-9b", 42 * 8 * 512 * F16, 21 * 8 * 512 * F16, 0),
    ("gemma-2-2b", 26 * 4 * 512 * F16, 13 * 4 * 512 * F16, 0),
    # Gemma-3: 5 local (window 1024 / 512) : 1 global
    ("gemma-3-27b-it", 62 * 16 * 256 * F16, 10 * 16 * 256 * F16, 0),
    ("gemma-3-1b-it", 26 * 1 * 512 * F16, 4 * 1 * 512 * F16, 0),
    # GPT-OSS: alternating 128-token windows, 8 KV heads × 64
    ("gpt-oss-20b", 24 * 8 * 128 * F16, 12 * 8 * 128 * F16, 0),
    ("gpt-oss-120b", 36 * 8 * 128 * F16, 18 * 8 * 128 * F16, 0),
    # MLA: one latent of kv_lora_rank 512 + qk_rope_head_dim 64 per layer, no V
    ("deepseek-v3", 61 * 576 * F16, 61 * 576 * F16, 0),
    ("kimi-k2-instruct", 61 * 576 * F16, 61 * 576 * F16, 0),
    # ChatGLM dialect: multi_query_group_num 2, kv_channels 128
    ("glm-4-9b", 40 * 2 * 256 * F16, 40 * 2 * 256 * F16, 0),
    ("glm-4.5", 92 * 8 * 256 * F16, 92 * 8 * 256 * F16, 0),
    # Phi-3-mini-4k: every layer has a 2047-token window; 32 KV heads × 96 (MHA)
    ("phi-3-mini-4k-instruct", 32 * 32 * 192 * F16, 0, 0),
    ("phi-3-medium-4k-instruct", 40 * 10 * 256 * F16, 0, 0),
    # Nemotron-H: 10 attention layers; 54 Mamba2 layers of 256 heads × 64 × 256 state
    # + conv 3 × (16384 + 2·8·256)
    ("nemotron-h-56b-base-8k", 10 * 8 * 256 * F16, 10 * 8 * 256 * F16,
     54 * (256 * 64 * 256 + 3 * (16384 + 2 * 8 * 256)) * F32),
    # MiniMax-M1: 10 softmax layers, 70 lightning layers of 64 heads × 128 × 128 state
    ("minimax-m1-80k", 10 * 8 * 256 * F16, 10 * 8 * 256 * F16, 70 * 64 * 128 * 128 * F32),
    # Qwen3-Next: every 4th of 48 layers full attention; 36 Gated DeltaNet layers of
    # 32 value heads × 128 × 128 + conv 3 × (2·16·128 + 32·128)
    ("qwen3-next-80b-a3b-instruct", 12 * 2 * 512 * F16, 12 * 2 * 512 * F16,
     36 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * F32),
    # Kimi Linear: 7 MLA layers (latent 576) + 20 Kimi Delta Attention layers of
    # 32 heads × 128 × 128 + short convs 3 × (3·32·128)
    ("kimi-linear-48b-a3b-instruct", 7 * 576 * F16, 7 * 576 * F16,
     20 * (32 * 128 * 128 + 3 * 3 * 32 * 128) * F32),
    # DeepSeek Sparse Attention: the MLA latent (512 + 64) in every layer plus the lightning
    # indexer's key (index_head_dim 128, K only) in every layer that runs an indexer:
    # DeepSeek-V3.2 and GLM-5/5.1 all of them (index_topk_freq 1 by default)
    ("deepseek-v3.2", 61 * (576 + 128) * F16, 61 * (576 + 128) * F16, 0),
    ("glm-5", 78 * (576 + 128) * F16, 78 * (576 + 128) * F16, 0),
    ("glm-5.1", 78 * (576 + 128) * F16, 78 * (576 + 128) * F16, 0),
    # GLM-5.2: index_topk_freq 4, index_skip_topk_offset 3: layers 0, 1, 2 and then every
    # 4th from 6 to 74 keep an indexer (21, the "full" entries of indexer_types)
    ("glm-5.2", (78 * 576 + 21 * 128) * F16, (78 * 576 + 21 * 128) * F16, 0),
    # Nemotron 3 Nano: hybrid_override_pattern gives 6 attention layers (2 KV heads × 128)
    # and 23 Mamba-2 layers of 64 heads × 64 × 128 + conv 3 × (4096 + 2·8·128)
    ("nemotron-3-nano-30b-a3b", 6 * 2 * 256 * F16, 6 * 2 * 256 * F16,
     23 * (64 * 64 * 128 + 3 * (4096 + 2 * 8 * 128)) * F32),
    # Nemotron 3 Super: 8 attention layers; 40 Mamba-2 of 128 heads × 64 × 128
    # + conv 3 × (8192 + 2·8·128); the MTP step's attention layer only with --mtp
    ("nemotron-3-super-120b-a12b", 8 * 2 * 256 * F16, 8 * 2 * 256 * F16,
     40 * (128 * 64 * 128 + 3 * (8192 + 2 * 8 * 128)) * F32),
    # Nemotron 3 Ultra: layers_block_type lists 108 blocks, 12 attention and 48 Mamba-2 of
    # 256 heads × 64 × 128 + conv 3 × (16384 + 2·8·128)
    ("nemotron-3-ultra-550b-a55b", 12 * 2 * 256 * F16, 12 * 2 * 256 * F16,
     48 * (256 * 64 * 128 + 3 * (16384 + 2 * 8 * 128)) * F32),
    # Llama-3.3-Nemotron-Super-49B: block_configs give attention to 49 of 80 layers, each
    # 64 // n_heads_in_group 8 = 8 KV heads × 128; the other 31 are no-ops
    ("llama-3.3-nemotron-super-49b", 49 * 8 * 256 * F16, 49 * 8 * 256 * F16, 0),
    # Gemma 4 26B-A4B: 5 full layers of num_global_key_value_heads 2 × global_head_dim 512
    # (attention_k_eq_v: V is K, but K and V are both cached) + 25 sliding layers of
    # 8 KV heads × head_dim 256 (window 1024)
    ("gemma-4-26b-a4b", (5 * 2 * 1024 + 25 * 8 * 512) * F16, 5 * 2 * 1024 * F16, 0),
    # Gemma 4 31B: 10 full layers of 4 × 512 + 50 sliding layers of 16 × 256
    ("gemma-4-31b-it", (10 * 4 * 1024 + 50 * 16 * 512) * F16, 10 * 4 * 1024 * F16, 0),
    # MiMo-V2-Flash: hybrid_layer_pattern gives 9 full layers of 4 KV heads × (K 192 + V 128)
    # and 39 sliding layers (window 128) of swa 8 KV heads × (192 + 128)
    ("mimo-v2-flash", (9 * 4 * 320 + 39 * 8 * 320) * F16, 9 * 4 * 320 * F16, 0),
    # Kimi-K3: 24 MLA layers (latent 512 + 64) + 69 KDA layers of 96 heads × 128 × 128 +
    # short convs 3 × (3·96·128)
    ("kimi-k3", 24 * 576 * F16, 24 * 576 * F16, 69 * (96 * 128 * 128 + 3 * 3 * 96 * 128) * F32),
    # Step-3.7-Flash: 12 full + 33 sliding (window 512) layers, 8 KV heads × 128 on each
    ("step-3.7-flash", 45 * 8 * 256 * F16, 12 * 8 * 256 * F16, 0),
    # DeepSeek-V4: every layer a 128-token window of one 512-value latent (K = V); ratio-4
    # layers add a latent and a 128-value indexer key per 4 tokens, ratio-128 layers a latent
    # per 128 tokens; compressor state f32: 2·8·1024 + 2·8·256 (ratio 4), 2·128·512 (128).
    # Flash: 21 ratio-4, 20 ratio-128 of 43 layers; Pro: 30 and 31 of 61
    ("deepseek-v4-flash", 43 * 512 * F16 + 21 * 640 * F16 // 4 + 20 * 512 * F16 // 128,
     21 * 640 * F16 // 4 + 20 * 512 * F16 // 128,
     21 * (2 * 8 * 1024 + 2 * 8 * 256) * F32 + 20 * 2 * 128 * 512 * F32),
    ("deepseek-v4-pro", 61 * 512 * F16 + 30 * 640 * F16 // 4 + 31 * 512 * F16 // 128,
     30 * 640 * F16 // 4 + 31 * 512 * F16 // 128,
     30 * (2 * 8 * 1024 + 2 * 8 * 256) * F32 + 31 * 2 * 128 * 512 * F32),
    # MiniMax-M3: 60 layers of 4 KV heads × 128 + one 128-value index key in the 57 sparse ones
    ("minimax-m3", 60 * 4 * 256 * F16 + 57 * 128 * F16, 60 * 4 * 256 * F16 + 57 * 128 * F16, 0),
    # Laguna: every 4th layer full from layer 0, the rest sliding (window 512); 8 KV heads ×
    # 128 on each. S-2.1: 12 full + 36 sliding; XS.2: 10 + 30
    ("laguna-s-2.1", 48 * 8 * 256 * F16, 12 * 8 * 256 * F16, 0),
    ("laguna-xs.2", 40 * 8 * 256 * F16, 10 * 8 * 256 * F16, 0),
    # EXAONE 4.5 33B: 16 full + 48 sliding (window 4096) layers of 8 KV heads × 128
    ("exaone-4.5-33b", 64 * 8 * 256 * F16, 16 * 8 * 256 * F16, 0),
    # Voxtral Mini: its Llama decoder, 30 layers of 8 × 128
    ("voxtral-mini-3b-2507", 30 * 8 * 256 * F16, 30 * 8 * 256 * F16, 0),
    # Devstral 2: 88 full layers of 8 × 128
    ("devstral-2-123b-instruct-2512", 88 * 8 * 256 * F16, 88 * 8 * 256 * F16, 0),
    # Hunyuan-A13B: 32 layers of 8 KV heads × attention_head_dim 128 (use_cla false)
    ("hunyuan-a13b-instruct", 32 * 8 * 256 * F16, 32 * 8 * 256 * F16, 0),
    # LongCat-Flash-Chat: two MLA attentions in each of 28 layers, a latent of 512 + 64 each
    ("longcat-flash-chat", 56 * 576 * F16, 56 * 576 * F16, 0),
    ("phi-4", 40 * 10 * 256 * F16, 40 * 10 * 256 * F16, 0),
    ("smollm-1.7b", 24 * 32 * 128 * F16, 24 * 32 * 128 * F16, 0),
]


@pytest.mark.parametrize(("model", "per_token", "marginal", "state"), GOLDEN,
                         ids=[g[0] for g in GOLDEN])
def test_golden(model, per_token, marginal, state):
    spec = load_model(model)
    assert bytes_per_token(spec) == per_token
    assert marginal_bytes_per_token(spec) == marginal
    assert cache_size(spec, 4096, 1).state_bytes == state


def test_at_least_25_golden_models():
    assert len({g[0] for g in GOLDEN}) >= 25


def test_sliding_window_caps_tokens():
    spec = load_model("gemma-2-9b")
    # past the 4096 window only the 21 global layers grow
    short, long = cache_size(spec, 4096, 1), cache_size(spec, 8192, 1)
    assert long.kv_bytes - short.kv_bytes == 4096 * 21 * 8 * 512 * F16


def test_cross_attention_counts_images_not_text():
    spec = load_model("llama-3.2-11b-vision-instruct")
    # 4 tiles × ((560/14)² + 1) tokens per image in each of the 8 cross-attention layers
    assert spec.cross_tokens_per_image == 4 * (40 * 40 + 1)
    one = cache_size(spec, 1000, 1, CacheOptions(images=1))
    two = cache_size(spec, 1000, 1, CacheOptions(images=2))
    assert two.kv_bytes - one.kv_bytes == 8 * 8 * 256 * F16 * 6404
    none = cache_size(spec, 1000, 1, CacheOptions(images=0))
    assert one.kv_bytes - none.kv_bytes == 8 * 8 * 256 * F16 * 6404


def test_chunked_local_layers_cap_at_chunk():
    spec = load_model("llama-4-scout-17b-16e-instruct")
    a, b = cache_size(spec, 8192, 1), cache_size(spec, 16384, 1)
    assert b.kv_bytes - a.kv_bytes == 8192 * 12 * 8 * 256 * F16
