"""llama-quantize's tensor types for a K-quant mix, from a config (kvcore/gguf_mix.py)."""

import json
from collections import Counter

import pytest

from kvcore import load_model
from kvcore.gguf_mix import TYPES, module_types, tensor_types
from kvcore.weights import weights_for

GiB = 2**30


def types(spec, fmt, category=None):
    return Counter(t for _, cat, t, _ in tensor_types(spec, fmt)
                   if category is None or cat == category)


def _mistral_like(vocab):
    """A Mistral-7B-shaped config (32 layers, 32/8 heads, FFN 14336)."""
    return json.dumps({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                       "hidden_size": 4096, "intermediate_size": 14336,
                       "num_hidden_layers": 32, "num_attention_heads": 32,
                       "num_key_value_heads": 8, "vocab_size": vocab,
                       "max_position_embeddings": 32768, "tie_word_embeddings": False,
                       "torch_dtype": "bfloat16"})


def test_q4_k_m_of_a_32_layer_llama_is_what_its_logs_print():
    # llama.cpp's logs of 32-layer Llama and Mistral Q4_K_M files: "type q4_K: 193 tensors,
    # type q6_K: 33 tensors" (attention V and FFN down on the 16 layers use_more_bits picks,
    # and the output matrix), and for a 32,002-token vocabulary "file size = 4.07 GiB
    # (4.83 BPW)"
    spec = load_model("llama-3.1-8b")
    counts = types(spec, "q4_k_m")
    assert (counts["Q4_K"], counts["Q6_K"]) == (193, 33)
    more = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    mods = spec.params.modules
    for leaf in ("v_proj", "down_proj"):
        layers = [int(mods[k].names[0].split(".")[1]) for k, _, t, _ in
                  tensor_types(spec, "q4_k_m")
                  if mods[k].names[0].endswith(leaf) and t == "Q6_K"]
        assert layers == more
    hermes = load_model(_mistral_like(32002))
    w = weights_for(hermes, "q4_k_m")
    assert f"{w.bytes / GiB:.2f}" == "4.07" and f"{w.bytes * 8 / w.params:.2f}" == "4.83"
    # Llama-3.1-8B: "file size = 4.58 GiB (4.89 BPW)"
    w8 = weights_for(spec, "q4_k_m")
    assert f"{w8.bytes / GiB:.2f}" == "4.58" and f"{w8.bytes * 8 / w8.params:.2f}" == "4.89"
    assert w8.source == "config, llama-quantize's tensor types"


def test_each_type_is_its_blocks_bytes():
    assert TYPES["Q4_K"].nbytes(256 * 10) == 1440 and TYPES["Q6_K"].nbytes(512) == 420
    assert TYPES["Q8_0"].nbytes(64) == 68 and TYPES["Q5_0"].nbytes(32) == 22
    spec = load_model("llama-3.1-8b")
    sizes = module_types(spec, "q4_k_m")
    mods = spec.params.modules
    # a v_proj of 1024 × 4096 in Q6_K (layer 0) and in Q4_K (layer 4)
    assert sizes[2] == 1024 * 4096 // 256 * 210 and sizes[2 + 8 * 4] == 1024 * 4096 // 256 * 144
    assert mods[2].names[0].endswith("v_proj") and mods[2 + 8 * 4].names[0] == "layers.4.self_attn.v_proj"


def test_eight_experts_raise_attention_and_a_moe_s_layers_come_from_its_names():
    mix = load_model("mixtral-8x7b-v0.1")
    assert set(types(mix, "q4_k_m", "attn_v")) == {"Q8_0"}
    assert set(types(mix, "q4_k_m", "attn_k")) == {"Q8_0"}
    assert set(types(mix, "q4_k_m", "attn_output")) == {"Q5_K"}
    # the routed experts' down projections: Q6_K on 16 of the 32 layers
    assert types(mix, "q4_k_m", "ffn_down") == Counter({"Q6_K": 16, "Q4_K": 16})
    # DeepSeek-V3 (256 experts): 61 layers, its dense, shared and routed down projections in a
    # layer all take the layer's type
    ds = load_model("deepseek-v3")
    by_layer = {}
    for k, cat, t, _ in tensor_types(ds, "q4_k_m"):
        if cat == "ffn_down":
            layer = int(ds.params.modules[k].names[0].split(".")[1])
            by_layer.setdefault(layer, set()).add(t)
    assert all(len(v) == 1 for v in by_layer.values())
    assert by_layer[0] == {"Q6_K"} and by_layer[10] == {"Q4_K"} and by_layer[60] == {"Q6_K"}


def test_rows_that_are_not_whole_blocks_fall_back():
    # gpt-oss's 2,880-wide rows are 11¼ blocks of 256: Q4_K falls back to Q5_0, Q6_K to Q8_0,
    # the output matrix to Q8_0
    oss = load_model("gpt-oss-20b")
    assert set(types(oss, "q4_k_m", "attn_q")) == {"Q5_0"}
    assert set(types(oss, "q4_k_m", "output")) == {"Q8_0"}
    # its routed experts ship in MXFP4 and stay so (17 bytes a 32-value block) in every mix
    assert set(types(oss, "q4_k_m", "ffn_down")) == {"MXFP4"}
    w = weights_for(oss, "q4_k_m")
    assert w.expert_bytes == oss.params.experts // 32 * 17
    # the attention output's rows are 64 heads × 64 = 4,096 wide: whole blocks, Q4_K
    assert set(types(oss, "q4_k_m", "attn_output")) == {"Q4_K"}


def test_seventy_b_fused_qkv_and_tied_embeddings():
    # an 80-layer Llama is a 70B to llama.cpp: attention V in Q5_K at least
    assert set(types(load_model("llama-3.1-70b"), "q4_k_m", "attn_v")) == {"Q5_K", "Q6_K"}
    # Phi-3's GGUF fuses Q, K and V: one choice a layer, over 32 layers
    phi = load_model("phi-3-mini-4k-instruct")
    qkv = [t for _, cat, t, _ in tensor_types(phi, "q4_k_m") if cat == "attn_qkv"]
    assert len(qkv) == 96 and Counter(qkv) == Counter({"Q6_K": 48, "Q4_K": 48})
    assert all(len(set(qkv[i:i + 3])) == 1 for i in range(0, 96, 3))
    # Gemma 3 ties its embedding to the output: Q6_K, as the output matrix would be
    gemma = load_model("gemma-3-27b-it")
    assert set(types(gemma, "q4_k_m", "token_embd")) == {"Q6_K"}
    # its text weights, 16.5 GB as its Q4_K_M files; the vision tower in float16 beside them
    text = weights_for(gemma, "q4_k_m", include_encoder=False)
    assert 16.4e9 < text.bytes < 16.6e9
    assert weights_for(gemma, "q4_k_m").bytes - text.bytes == 2 * gemma.params.encoder


@pytest.mark.parametrize("fmt", ["q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "q8_0",
                                 "iq4_xs"])
def test_every_mix_sums_its_tensors(fmt):
    spec = load_model("qwen3-30b-a3b")
    w = weights_for(spec, fmt)
    assert w.bytes == sum(module_types(spec, fmt))
    # routed experts in the mix's types, the active share of them k of E
    assert w.expert_bytes == sum(b for m, b in zip(spec.params.modules,
                                                   module_types(spec, fmt), strict=True)
                                 if m.role == "experts")
    assert w.active_expert_bytes == w.expert_bytes * 8 // 128
    bits = w.bytes * 8 / w.params
    assert {"q2_k": (2.6, 4.0), "q3_k_m": (3.4, 4.4), "q4_k_m": (4.5, 5.2),
            "q5_k_m": (5.5, 6.1), "q6_k": (6.5, 6.7), "q8_0": (8.4, 8.6),
            "iq4_xs": (4.25, 4.6)}[fmt][0] < bits


def test_a_latent_moe_s_experts_and_aggregate_modules_keep_their_widths():
    from kvcore.gguf_mix import _tensors
    k3 = load_model("kimi-k3")
    mods = k3.params.modules
    experts = next(i for i, m in enumerate(mods) if m.role == "experts")
    parts = [t for t in _tensors(k3, mods) if t.module == experts]
    # the experts work in the 3,584-wide latent fc1_latent_proj projects to, 3,072 wide inside
    assert [(t.category, t.ncols) for t in parts] == [("ffn_gate", 3584), ("ffn_up", 3584),
                                                      ("ffn_down", 3072)]
    assert sum(t.values for t in parts) == mods[experts].params
    # an aggregate of several projections (Kimi's linear-attention projections) reads the
    # hidden state: whole blocks, the mix's own type (not a float16 fall back)
    agg = next(i for i, m in enumerate(mods) if m.names[0].endswith("projections"))
    assert {t for k, _, t, _ in tensor_types(k3, "q4_k_m") if k == agg} == {"Q4_K"}


def test_iq4_xs_raises_attention_v_where_four_query_heads_share_one():
    # Llama-3.1-8B: 32 query heads over 8 KV heads; attention V in Q5_K, the output in Q6_K,
    # every other matrix IQ4_XS (136 bytes a 256-value block), its FFN down projections too
    # (the first eighth goes to Q5_K only without an importance matrix)
    spec = load_model("llama-3.1-8b")
    assert set(types(spec, "iq4_xs", "attn_v")) == {"Q5_K"}
    assert set(types(spec, "iq4_xs", "output")) == {"Q6_K"}
    assert set(types(spec, "iq4_xs", "ffn_down")) == {"IQ4_XS"}
    assert TYPES["IQ4_XS"].nbytes(512) == 272
