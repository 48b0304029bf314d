"""llama-quantize's tensor types for a K-quant mix, from a config (kvcore/gguf_mix.py)."""

import json
from collections import Counter

import pytest

from kvcore import load_model
from kvcore.gguf_mix import MIXES, TYPES, module_types, tensor_types
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
    # an 80-layer Llama whose heads each have their own K and V is a 65B to llama.cpp: its
    # attention V keeps the mix's types
    sixty_five = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                             "hidden_size": 8192, "intermediate_size": 22016,
                             "num_hidden_layers": 80, "num_attention_heads": 64,
                             "num_key_value_heads": 64, "vocab_size": 32000,
                             "max_position_embeddings": 2048, "torch_dtype": "float16"})
    assert set(types(load_model(sixty_five), "q4_k_m", "attn_v")) == {"Q4_K", "Q6_K"}
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


@pytest.mark.parametrize("fmt", sorted(MIXES))
def test_every_mix_sums_its_tensors(fmt):
    spec = load_model("qwen3-30b-a3b")
    w = weights_for(spec, fmt)
    assert w.bytes == sum(module_types(spec, fmt))
    # routed experts in the mix's types, the active share of them k of E
    assert w.expert_bytes == sum(b for m, b in zip(spec.params.modules,
                                                   module_types(spec, fmt), strict=True)
                                 if m.role == "experts")
    assert w.active_expert_bytes == w.expert_bytes * 8 // 128
    # the mix between its type's bits and a bit over them (the output, embeddings and raised
    # tensors); IQ3_XS lowers most gate and up projections to IQ3_XXS
    base = TYPES["IQ3_XXS" if fmt == "iq3_xs" else MIXES[fmt]]
    bits = w.bytes * 8 / w.params
    assert base.block_bytes * 8 / base.block < bits < base.block_bytes * 8 / base.block + 1.1


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


# bartowski's GGUFs of Llama-3.1-Nemotron-70B-Instruct (Llama-3.1-70B's shapes), made with an
# importance matrix: file sizes in GB as its model card lists them
# (https://ozeki.chat/p_8590-understanding-ai-model-files.html quotes the table)
PUBLISHED_70B = {"q8_0": 74.98, "q6_k": 57.89, "q5_k_m": 49.95, "q5_k_s": 48.66,
                 "q4_k_m": 42.52, "q4_k_s": 40.35, "q4_0": 40.12, "iq4_xs": 37.90,
                 "q3_k_l": 37.14, "q3_k_m": 34.27, "iq3_m": 31.94, "q3_k_s": 30.91}


@pytest.mark.parametrize("fmt", sorted(PUBLISHED_70B))
def test_a_70b_s_published_files_are_its_tensors_and_a_header(fmt):
    # a file is its tensors and a header (the tokenizer's 128k tokens and 280k merges, some
    # 8 MB): kvcore's tensors lie within 20 MB under each file, never over it. Q4_0's first
    # ten FFN down projections in Q4_1 (an importance matrix) are 147 MB of it.
    spec = load_model("llama-3.1-70b")
    tensors = sum(module_types(spec, fmt)) / 1e9
    assert PUBLISHED_70B[fmt] - 0.02 < tensors < PUBLISHED_70B[fmt]


def test_llama_quantize_s_help_sizes_of_llama_3_8b():
    # llama-quantize's list of types (tools/quantize/quantize.cpp) gives each mix's size for
    # Llama-3-8B in GiB, its header (about 0.008 GiB) included; Q4_0 and Q5_0 there without an
    # importance matrix (their first four FFN down projections not raised: 0.0137 GiB less)
    spec = load_model("llama-3.1-8b")
    help_gib = {"q2_k": 2.96, "q3_k_s": 3.41, "q3_k_m": 3.74, "q3_k_l": 4.03, "q4_k_s": 4.37,
                "q4_k_m": 4.58, "q5_k_s": 5.21, "q5_k_m": 5.33, "q6_k": 6.14, "q8_0": 7.96,
                "q4_1": 4.78, "q5_1": 5.65, "q4_0": 4.34, "q5_0": 5.21}
    raised = 4 * 4096 * 14336 * 2 // 32
    for fmt, gib in help_gib.items():
        size = sum(module_types(spec, fmt)) - (raised if fmt in ("q4_0", "q5_0") else 0)
        assert gib - 0.015 < size / GiB < gib + 0.005, fmt


def _by_layer(spec, fmt, category):
    mods = spec.params.modules
    out = {}
    for k, cat, t, _ in tensor_types(spec, fmt):
        if cat == category:
            out.setdefault(int(mods[k].names[0].split(".")[1]), set()).add(t)
    return {i: "/".join(sorted(v)) for i, v in sorted(out.items())}


def test_the_k_quant_s_and_l_mixes():
    spec = load_model("llama-3.1-8b")
    # Q4_K_S: the first four attention V tensors and the first eighth of FFN down in Q5_K
    v = _by_layer(spec, "q4_k_s", "attn_v")
    assert [i for i, t in v.items() if t == "Q5_K"] == [0, 1, 2, 3]
    assert set(v.values()) == {"Q5_K", "Q4_K"}
    down = _by_layer(spec, "q4_k_s", "ffn_down")
    assert [i for i, t in down.items() if t == "Q5_K"] == [0, 1, 2, 3]
    # Q3_K_L: attention V, its output and FFN down in Q5_K; Q3_K_S: Q3_K throughout
    for cat in ("attn_v", "attn_output", "ffn_down"):
        assert set(types(spec, "q3_k_l", cat)) == {"Q5_K"}
        assert set(types(spec, "q3_k_s", cat)) == {"Q3_K"}
    assert set(types(spec, "q3_k_s", "output")) == {"Q6_K"}
    # on a 70B, Q3_K_S's attention V is Q5_K; Q5_K_S is Q5_K but the output
    assert set(types(load_model("llama-3.1-70b"), "q3_k_s", "attn_v")) == {"Q5_K"}
    assert types(spec, "q5_k_s") == Counter({"Q5_K": 225, "Q6_K": 1, "F32": 32})
    # Q2_K_S: attention V in Q4_K (four query heads a KV head), the first eighth of FFN down
    # in Q4_K, the rest Q2_K
    assert set(types(spec, "q2_k_s", "attn_v")) == {"Q4_K"}
    assert Counter(_by_layer(spec, "q2_k_s", "ffn_down").values()) == Counter(
        {"Q4_K": 4, "Q2_K": 28})


def test_the_legacy_types_keep_their_type_but_the_output():
    spec = load_model("llama-3.1-8b")
    # Q4_0 with an importance matrix: the first eighth of FFN down in Q4_1; the token
    # embedding Q4_0, the output Q6_K
    down = _by_layer(spec, "q4_0", "ffn_down")
    assert [i for i, t in down.items() if t == "Q4_1"] == [0, 1, 2, 3]
    assert set(types(spec, "q4_0", "token_embd")) == {"Q4_0"}
    assert set(types(spec, "q4_0", "output")) == {"Q6_K"}
    assert set(types(spec, "q5_0", "ffn_down")) == {"Q5_0", "Q5_1"}
    assert types(spec, "q4_1") == Counter({"Q4_1": 225, "Q6_K": 1, "F32": 32})
    assert types(spec, "iq4_nl", "attn_v") == Counter({"Q5_K": 32})


def test_the_three_bit_importance_mixes():
    spec = load_model("llama-3.1-8b")
    # IQ3_XXS: Q and K in IQ2_S, V in Q4_K, the attention output in IQ3_S, the token
    # embedding IQ3_S, the output Q5_K
    assert set(types(spec, "iq3_xxs", "attn_q")) == {"IQ2_S"}
    assert set(types(spec, "iq3_xxs", "attn_k")) == {"IQ2_S"}
    assert set(types(spec, "iq3_xxs", "attn_v")) == {"Q4_K"}
    assert set(types(spec, "iq3_xxs", "attn_output")) == {"IQ3_S"}
    assert set(types(spec, "iq3_xxs", "token_embd")) == {"IQ3_S"}
    assert set(types(spec, "iq3_xxs", "output")) == {"Q5_K"}
    assert set(types(spec, "iq3_xxs", "ffn_down")) == {"IQ3_XXS"}
    # IQ3_XS: gate and up in IQ3_XXS on the middle three quarters of the layers (4 to 27)
    for cat in ("ffn_gate", "ffn_up"):
        mid = [i for i, t in _by_layer(spec, "iq3_xs", cat).items() if t == "IQ3_XXS"]
        assert mid == list(range(4, 28))
    assert set(types(spec, "iq3_xs", "attn_k")) == {"IQ3_XXS"}
    assert set(types(spec, "iq3_xs", "ffn_down")) == {"IQ3_S"}
    # IQ3_M: V and the attention output in Q4_K, the first eighth of FFN down too
    assert set(types(spec, "iq3_m", "attn_v")) == {"Q4_K"}
    assert set(types(spec, "iq3_m", "attn_output")) == {"Q4_K"}
    assert Counter(_by_layer(spec, "iq3_m", "ffn_down").values()) == Counter(
        {"Q4_K": 4, "IQ3_S": 28})


def test_the_one_and_two_bit_mixes():
    spec = load_model("llama-3.1-8b")
    # IQ2_XXS: attention V in Q4_K (four query heads a KV head), the first eighth of FFN down
    # and the token embedding in Q2_K, the output Q5_K, the rest IQ2_XXS
    assert set(types(spec, "iq2_xxs", "attn_v")) == {"Q4_K"}
    assert Counter(_by_layer(spec, "iq2_xxs", "ffn_down").values()) == Counter(
        {"Q2_K": 4, "IQ2_XXS": 28})
    assert set(types(spec, "iq2_xxs", "token_embd")) == {"Q2_K"}
    assert set(types(spec, "iq2_xxs", "output")) == {"Q5_K"}
    assert set(types(spec, "iq2_xxs", "attn_output")) == {"IQ2_XXS"}
    # IQ2_M (IQ2_S tensors) raises to IQ3_S; IQ1_S's attention output is IQ2_XXS
    assert set(types(spec, "iq2_m", "token_embd")) == {"IQ3_S"}
    assert set(types(spec, "iq2_m", "attn_output")) == {"IQ3_S"}
    assert set(types(spec, "iq2_m", "attn_q")) == {"IQ2_S"}
    assert set(types(spec, "iq2_s", "attn_q")) == {"IQ2_XS"}
    assert set(types(spec, "iq1_s", "attn_output")) == {"IQ2_XXS"}
    assert set(types(spec, "iq1_m", "ffn_up")) == {"IQ1_M"}
    assert TYPES["IQ2_XXS"].nbytes(256) == 66 and TYPES["IQ1_S"].nbytes(256) == 50
    # this branch counts FFN down projections in file order, not by layer: DeepSeek-V3's 61
    # layers raise the first seven tensors, its three dense layers' and layers 3 and 4's
    # routed and shared ones
    ds = load_model("deepseek-v3")
    down = _by_layer(ds, "iq2_xxs", "ffn_down")
    assert [i for i, t in down.items() if t != "IQ2_XXS"] == [0, 1, 2, 3, 4]
    assert down[4] == "Q2_K"
    # Mixtral's eight experts: attention K in Q4_K, its output in Q5_K
    mix = load_model("mixtral-8x7b-v0.1")
    assert set(types(mix, "iq2_xs", "attn_k")) == {"Q4_K"}
    assert set(types(mix, "iq2_xs", "attn_output")) == {"Q5_K"}


def test_each_mix_s_flat_bits_are_its_average_on_a_70b_llama():
    # where a config lists no modules (and for draft layers) a mix is priced at one average:
    # an 80-layer Llama's, to the hundredth
    from kvcore.weights import get_weight_format

    spec = load_model("llama-3.1-70b")
    for fmt in MIXES:
        bits = sum(module_types(spec, fmt)) * 8 / spec.params.total
        assert get_weight_format(fmt).bits_per_weight == pytest.approx(bits, abs=0.006), fmt
