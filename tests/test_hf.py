"""config.json dialects and the errors for configs kvplan cannot size."""

import copy
import json
from pathlib import Path

import pytest

from kvcore import (
    CacheOptions,
    ConfigError,
    InputError,
    LayerKind,
    bytes_per_token,
    cache_size,
    load_model,
    model_catalog,
    spec_from_config,
)
from kvcore.parallel import Parallel, rank_spec


def real(model_id):
    entry = next(e for e in model_catalog() if e.id == model_id)
    return entry.config()


def spec(config):
    return spec_from_config(config, name="t", source="test")


def test_text_config_nesting_wins_over_top_level():
    cfg = real("gemma-3-27b-it")
    assert "text_config" in cfg
    s = spec(cfg)
    assert s.model_type == "gemma3_text"
    assert {g.kind for g in s.groups} == {LayerKind.FULL, LayerKind.SLIDING}


def test_documented_defaults_are_recorded():
    s = load_model("gemma-3-27b-it")
    # the 27B text_config leaves the 5:1 pattern to the architecture's default
    assert "sliding_window_pattern" in s.defaulted


def test_chatglm_dialect():
    cfg = real("glm-4-9b")
    assert "multi_query_group_num" in cfg and "kv_channels" in cfg
    s = spec(cfg)
    (g,) = s.groups
    assert (g.count, g.n_kv_heads, g.head_dim_k) == (40, 2, 128)


def test_chatglm_without_multi_query_is_mha():
    cfg = real("glm-4-9b")
    cfg["multi_query_attention"] = False
    (g,) = spec(cfg).groups
    assert g.n_kv_heads == cfg["num_attention_heads"]


def test_head_dim_explicit_beats_hidden_over_heads():
    cfg = real("qwen3-32b")
    assert cfg["hidden_size"] // cfg["num_attention_heads"] != cfg["head_dim"]
    (g,) = spec(cfg).groups
    assert g.head_dim_k == cfg["head_dim"]


def test_missing_kv_heads_means_mha_and_is_recorded():
    cfg = real("llama-3.1-8b")
    del cfg["num_key_value_heads"]
    s = spec(cfg)
    assert s.groups[0].n_kv_heads == cfg["num_attention_heads"]
    assert "num_key_value_heads" in s.defaulted


@pytest.mark.parametrize("field", ["num_hidden_layers", "hidden_size", "vocab_size"])
def test_missing_required_field_is_named(field):
    cfg = real("llama-3.1-8b")
    del cfg[field]
    with pytest.raises(ConfigError) as err:
        spec(cfg)
    assert field in str(err.value)


def test_missing_mla_field_is_named():
    cfg = real("deepseek-v3")
    del cfg["qk_rope_head_dim"]
    with pytest.raises(ConfigError, match="qk_rope_head_dim"):
        spec(cfg)


def test_missing_gdn_field_is_named():
    cfg = real("qwen3.5-27b")
    del cfg["text_config"]["linear_num_value_heads"]
    with pytest.raises(ConfigError, match="linear_num_value_heads"):
        spec(cfg)


def test_unknown_layer_type_is_an_error():
    cfg = real("gpt-oss-20b")
    cfg["layer_types"][3] = "hyena"
    with pytest.raises(ConfigError, match=r"layer_types\[3\]"):
        spec(cfg)


@pytest.mark.parametrize(("field", "value", "what"), [
    ("zero_expert_num", 256, "zero-computation experts"),
    ("ngram_vocab_size_ratio", 78, "n-gram embedding tables"),
    ("ngram_vocab_size_base", 1 << 20, "an n-gram embedding table"),
    ("hc_mult", 4, "hyper-connections"),
    ("hc_count", 4, "hyper-connections"),
])
def test_structure_read_for_other_architectures_only_is_refused(field, value, what):
    cfg = real("qwen3-30b-a3b")
    base = spec(cfg)
    # a neutral value changes nothing
    assert spec({**cfg, field: 0 if field != "hc_mult" else 1}).params == base.params
    with pytest.raises(ConfigError, match=what) as e:
        spec({**cfg, field: value})
    assert e.value.field == field and "qwen3_moe" in str(e.value)


def test_layer_types_length_mismatch():
    cfg = real("gpt-oss-20b")
    cfg["layer_types"] = cfg["layer_types"][:-1]
    with pytest.raises(ConfigError, match="one type per layer"):
        spec(cfg)


@pytest.mark.parametrize("bad", [-4, 0, 2.5, "32", None, float("inf"), True])
def test_bad_numbers_rejected(bad):
    cfg = real("llama-3.1-8b")
    cfg["num_hidden_layers"] = bad
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        spec(cfg)


def test_no_model_type():
    with pytest.raises(ConfigError, match="model_type"):
        spec({"num_hidden_layers": 2})


def test_not_an_object():
    with pytest.raises(ConfigError):
        spec([1, 2, 3])


def test_qwen2_sliding_window_off_unless_enabled():
    cfg = real("qwen2.5-7b")
    assert cfg["use_sliding_window"] is False and cfg["sliding_window"]
    assert {g.kind for g in spec(cfg).groups} == {LayerKind.FULL}
    cfg["use_sliding_window"] = True
    cfg["max_window_layers"] = 20
    kinds = {g.kind: g.count for g in spec(cfg).groups}
    assert kinds == {LayerKind.FULL: 20, LayerKind.SLIDING: 8}


def test_mistral_window_applies_to_every_layer():
    (g,) = load_model("mistral-7b-v0.1").groups
    assert (g.kind, g.window, g.count) == (LayerKind.SLIDING, 4096, 32)


def test_gemma2_alternates_from_layer_zero():
    s = load_model("gemma-2-9b")
    sliding = next(g for g in s.groups if g.kind == LayerKind.SLIDING)
    assert sliding.layers[:3] == (0, 2, 4)


def test_mla_one_latent_head_no_v():
    s = load_model("deepseek-v3")
    main = [g for g in s.groups if not g.mtp]
    assert len(main) == 1
    g = main[0]
    assert (g.kind, g.n_kv_heads, g.head_dim_k, g.head_dim_v, g.count) == (LayerKind.MLA, 1, 576, 0, 61)
    assert s.has_mtp  # num_nextn_predict_layers = 1, off unless asked


def test_nemotron_h_pattern():
    s = load_model("nemotron-h-56b-base-8k")
    kinds = {g.kind: g.count for g in s.groups}
    assert kinds == {LayerKind.FULL: 10, LayerKind.MAMBA: 54}


def test_pasted_json_text_round_trips():
    cfg = real("qwen3-8b")
    s = load_model(json.dumps(cfg))
    assert s.source == "pasted config"
    assert s.groups == load_model("qwen3-8b").groups


def test_config_dict_is_not_mutated():
    cfg = real("qwen3.5-27b")
    before = copy.deepcopy(cfg)
    spec(cfg)
    assert cfg == before


# Small hand-made configs exercise dialect rules whose real configs are not bundled.

def test_jamba_attention_period_and_mamba1_state():
    cfg = {"model_type": "jamba", "num_hidden_layers": 16, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
           "intermediate_size": 128, "attn_layer_period": 8, "attn_layer_offset": 4,
           "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
           "num_experts": 4, "num_experts_per_tok": 2, "expert_layer_period": 2,
           "expert_layer_offset": 1}
    s = spec(cfg)
    kinds = {g.kind: g.layers for g in s.groups}
    assert kinds[LayerKind.FULL] == (4, 12)
    mamba = next(g for g in s.groups if g.kind == LayerKind.MAMBA)
    # d_inner = 2 × 64: ssm 128 × 16 + conv 3 × 128
    assert mamba.state_values == 128 * 16 + 3 * 128


def test_falcon_h1_layers_have_attention_and_mamba2():
    cfg = {"model_type": "falcon_h1", "num_hidden_layers": 4, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100,
           "intermediate_size": 128, "mamba_d_ssm": 128, "mamba_n_heads": 8, "mamba_d_head": 16,
           "mamba_n_groups": 1, "mamba_d_state": 32, "mamba_d_conv": 4}
    s = spec(cfg)
    assert {g.kind: g.count for g in s.groups} == {LayerKind.FULL: 4, LayerKind.MAMBA: 4}
    mamba = next(g for g in s.groups if g.kind == LayerKind.MAMBA)
    # 8 heads × 16 × 32 ssm + conv 3 × (128 + 2·1·32)
    assert mamba.state_values == 8 * 16 * 32 + 3 * (128 + 2 * 32)
    # under tp 2 the heads and x channels split, the single B/C group is kept whole per rank
    shard = next(g for g in rank_spec(s, Parallel(tp=2)).groups if g.kind == LayerKind.MAMBA)
    assert shard.conv_state_values == 3 * (128 // 2 + 2 * 32)
    assert shard.state_values == 8 * 16 * 32 // 2 + 3 * (128 // 2 + 2 * 32)


def test_cohere2_every_fourth_layer_global():
    cfg = {"model_type": "cohere2", "num_hidden_layers": 8, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 100,
           "intermediate_size": 128, "sliding_window": 4096, "sliding_window_pattern": 4}
    s = spec(cfg)
    full = next(g for g in s.groups if g.kind == LayerKind.FULL)
    assert full.layers == (3, 7)


def test_mamba_missing_state_field_is_named():
    cfg = {"model_type": "jamba", "num_hidden_layers": 8, "hidden_size": 64,
           "num_attention_heads": 4, "vocab_size": 100, "attn_layer_period": 8,
           "attn_layer_offset": 4, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_d_state": "x"}
    with pytest.raises(ConfigError, match="ssm_state_size"):
        spec(cfg)


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -1.0, 0, "2", True, 1e9])
def test_lfm2_ffn_multiplier_must_be_a_sane_number(bad):
    # LFM2 scales its auto-adjusted SwiGLU width by block_ffn_dim_multiplier: an infinite,
    # negative or absurd one is bad input (it overflowed once), named in a one-line error
    cfg = real("lfm2.5-vl-1.6b")
    text = cfg.get("text_config", cfg)
    text["block_ffn_dim_multiplier"] = bad
    with pytest.raises(ConfigError, match="block_ffn_dim_multiplier"):
        spec(cfg)


def test_lfm2_short_conv_layers_are_a_recurrent_state():
    from kvcore import load_model
    from kvcore.model import LayerKind
    from kvcore.parallel import Parallel, rank_spec

    spec = load_model("lfm2.5-vl-1.6b")
    full, conv = spec.groups
    assert full.kind is LayerKind.FULL and full.layers == (2, 5, 8, 10, 12, 14)
    assert conv.kind is LayerKind.CONV and conv.count == 10 and conv.kind.is_recurrent
    # the last conv_L_cache − 1 = 2 inputs of 2048 channels, all of it conv state
    assert conv.state_values == conv.conv_state_values == 2 * 2048
    # language model: tied 65536 × 2048 embedding; 6 attention layers (q, o 2048², k, v
    # 2048 × 512); 10 conv layers (in_proj 2048 × 3·2048, 2048 × 3 taps, out_proj 2048²);
    # SwiGLU auto-adjusted from 12288 to 2/3 = 8192; two norms a layer; final norm; the
    # attention layers' RMSNorms of q and k (head_dim 64 each)
    hidden = 2048
    attn = 2 * hidden * hidden + 2 * hidden * 512 + 2 * 64
    conv_params = hidden * 3 * hidden + hidden * 3 + hidden * hidden
    mlp = 3 * hidden * 8192
    lm = 65536 * hidden + 6 * attn + 10 * conv_params + 16 * (mlp + 2 * hidden)
    assert spec.params.total - spec.params.encoder in (lm, lm + hidden)
    # tensor parallel splits the conv channels
    half = rank_spec(spec, Parallel(tp=2)).groups[1]
    assert half.state_values == 2048


def _gqa(**fields):
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 4096,
           "num_attention_heads": 32, "vocab_size": 1000}
    cfg.update(fields)
    return cfg


@pytest.mark.parametrize(("fields", "expected"), [
    ({"num_key_value_heads": 5},
     "'num_key_value_heads' must divide num_attention_heads (32) evenly for grouped-query "
     "attention, got 5"),
    ({"num_key_value_heads": 64}, "'num_key_value_heads' must be at most num_attention_heads "
                                  "(32), got 64"),
    ({"n_kv_heads": 12}, "'n_kv_heads' must divide num_attention_heads (32)"),
    ({"n_head": 32, "num_attention_heads": None, "num_key_value_heads": 48},
     "'num_key_value_heads' must be at most n_head (32), got 48"),
])
def test_kv_heads_must_divide_attention_heads(fields, expected):
    with pytest.raises(ConfigError) as err:
        spec(_gqa(**fields))
    assert expected in str(err.value)
    assert err.value.field == "num_key_value_heads"
    assert "\n" not in str(err.value)


def test_kv_heads_dividing_attention_heads_are_sized():
    for kv in (1, 2, 4, 8, 16, 32):
        (g,) = spec(_gqa(num_key_value_heads=kv)).groups
        assert g.n_kv_heads == kv


def test_chatglm_group_count_must_divide_heads():
    cfg = real("glm-4-9b")
    cfg["multi_query_group_num"] = 3
    with pytest.raises(ConfigError, match="'multi_query_group_num' must divide") as err:
        spec(cfg)
    assert err.value.field == "multi_query_group_num"


@pytest.mark.parametrize("kind", ["sliding", "chunked", "cross", "hybrid"])
def test_kv_heads_checked_for_every_kind_that_caches_them(kind):
    model = {"sliding": "mistral-7b-v0.1", "chunked": "llama-4-scout-17b-16e-instruct",
             "cross": "llama-3.2-11b-vision-instruct", "hybrid": "qwen3.5-27b"}[kind]
    cfg = real(model)
    target = cfg.get("text_config", cfg)
    target["num_key_value_heads"] = target["num_attention_heads"] + 1
    with pytest.raises(ConfigError, match="must be at most"):
        spec(cfg)


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-v2-lite-chat", "kimi-k2-instruct",
                                   "kimi-linear-48b-a3b-instruct"])
def test_kv_heads_not_checked_where_no_layer_caches_them(model):
    # MLA caches one latent and KDA a state: their num_key_value_heads sizes no cache
    cfg = real(model)
    cfg["num_key_value_heads"] = 5
    assert spec(cfg).groups


def test_every_catalog_model_passes_the_head_check():
    from app.common import make_query
    from kvcore.query import answer

    for entry in model_catalog():
        if entry.head_of:
            # an EAGLE head is planned as its target's draft (tests/test_eagle.py)
            continue
        data = answer(make_query(load_model(entry.id), context="32k", sequences="2",
                                 kv="q8_0", gpu="h200", mtp=True))
        assert data["total_bytes"] > 0, entry.id


@pytest.mark.parametrize(("value", "shown"), [(1e308, "1e+308"), (10**308, "1e+308"),
                                              (1e20, "1e+20"), (123456789012345678901, "1.23e+20"),
                                              (5000, "5,000"), ("x" * 1000, "(1,000 characters)")])
def test_huge_config_values_are_shown_short(value, shown):
    cfg = real("llama-3.1-8b")
    cfg["num_hidden_layers"] = value
    with pytest.raises(ConfigError) as err:
        spec(cfg)
    message = str(err.value)
    assert message.startswith("config.json field 'num_hidden_layers' must be ")
    assert message.endswith(shown) and len(message) < 130


def test_huge_multiplier_and_vision_values_are_shown_short():
    cfg = real("lfm2.5-vl-1.6b")
    target = cfg.get("text_config", cfg)
    target["block_auto_adjust_ff_dim"] = True
    target["block_ffn_dim_multiplier"] = 10**400
    with pytest.raises(ConfigError, match=r"up to 1,000, got 1e\+400$"):
        spec(cfg)
    cfg = real("llama-3.2-11b-vision-instruct")
    cfg["vision_config"]["image_size"] = "9" * 1000
    with pytest.raises(ConfigError, match=r"got '9{40}'… \(1,000 characters\)$"):
        spec(cfg)


# Published parameter counts (the Hub's safetensors metadata, as copied into public code):
# Llama-3.2-11B-Vision-Instruct 10,670,220,835; Qwen3-VL-8B-Instruct 8,767,123,696.
@pytest.mark.parametrize(("model_id", "published"), [
    ("llama-3.2-11b-vision-instruct", 10_670_220_835),
    ("qwen3-vl-8b-instruct", 8_767_123_696),
])
def test_vision_models_count_their_encoders(model_id, published):
    s = load_model(model_id)
    # within 0.05%: norms and a few biases are not counted
    assert abs(s.params.total - published) / published < 5e-4


def test_mllama_encoder_has_global_layers_and_tile_tables():
    s = load_model("llama-3.2-11b-vision-instruct")
    # 32 local + 8 global layers, a 9 x 4 x 1601 x 1280 tile position table, a 7680 -> 4096
    # projector: 895,028,755 parameters
    assert abs(s.params.encoder - 895_028_755) < 1000


def test_quantized_checkpoint_keeps_its_vision_tower_in_16_bits():
    from kvcore.weights import weights_for
    s = load_model("devstral-small-2-24b-instruct")
    # fp8 checkpoint whose quantization_config leaves model.vision_tower and
    # model.multi_modal_projector unconverted: the encoder is 2 bytes a parameter
    assert s.checkpoint_weights == "fp8" and s.params.encoder > 400_000_000
    with_encoder = weights_for(s).bytes
    without = weights_for(s, include_encoder=False).bytes
    assert with_encoder - without == 2 * s.params.encoder


# The Hub's safetensors parameter totals (main model + the next-n/MTP layer the checkpoint
# ships): DeepSeek-V3 684,531,386,000; GLM-4.5 358,337,791,296.
@pytest.mark.parametrize(("model_id", "published"), [
    ("deepseek-v3", 684_531_386_000),
    ("glm-4.5", 358_337_791_296),
])
def test_nextn_layers_carry_their_own_embedding_and_head(model_id, published):
    s = load_model(model_id)
    assert abs(s.params.total + s.params.mtp - published) / published < 1e-3


def test_qwen3_next_attention_has_its_output_gate():
    # the Hub's safetensors total, 81,324,862,720, includes one MTP layer the config does not
    # name: full attention with gate, 512 experts + shared expert + router, the 2h -> h fc
    s = load_model("qwen3-next-80b-a3b-instruct")
    h = 2048
    attention = h * 16 * 256 * 2 + 2 * h * 2 * 256 + 16 * 256 * h
    mtp = attention + 512 * 3 * h * 512 + 3 * h * 512 + h * 512 + 2 * h * h
    published = 81_324_862_720 - mtp
    assert abs(s.params.total - published) / published < 1e-3


# --- DeepSeek Sparse Attention ----------------------------------------------------------------

def _indexer(s, mtp=False):
    return next(g for g in s.groups if g.kind is LayerKind.INDEXER and g.mtp == mtp)


@pytest.mark.parametrize("model,layers", [
    ("deepseek-v3.2", list(range(61))),
    ("glm-5", list(range(78))),
    ("glm-5.1", list(range(78))),
    # index_topk_freq 4, index_skip_topk_offset 3: max(i - 2, 0) % 4 == 0 at 0, 1, 2, 6, ..., 74
    ("glm-5.2", [0, 1, 2, *range(6, 78, 4)]),
])
def test_dsa_indexer_layers(model, layers):
    s = load_model(model)
    g = _indexer(s)
    assert list(g.layers) == layers
    assert (g.n_kv_heads, g.head_dim_k, g.head_dim_v) == (1, 128, 0)
    mla = next(g for g in s.groups if g.kind is LayerKind.MLA and not g.mtp)
    assert mla.head_dim_k == 576
    # the indexer rides on MLA layers: they are not counted twice
    assert s.num_layers == mla.count
    # the next-n (MTP) layer always has an indexer of its own
    assert list(_indexer(s, mtp=True).layers) == [mla.count]


def test_glm52_indexer_types_agree_with_the_frequency_rule():
    cfg = real("glm-5.2")
    assert [i for i, t in enumerate(cfg["indexer_types"]) if t == "full"] == \
        list(_indexer(spec(cfg)).layers)


def test_dsa_indexer_types_that_disagree_are_refused():
    cfg = real("glm-5.2")
    cfg["indexer_types"][3] = "full"
    with pytest.raises(ConfigError) as e:
        spec(cfg)
    assert e.value.field == "indexer_types" and "layer 3" in str(e.value)


def test_dsa_index_topk_pattern_wins_over_frequency():
    cfg = real("glm-5")
    cfg["index_topk_freq"] = 4
    cfg["index_topk_pattern"] = "FS" * 39
    assert list(_indexer(spec(cfg)).layers) == list(range(0, 78, 2))


def test_dsa_without_index_topk_is_plain_mla():
    cfg = real("deepseek-v3.2")
    del cfg["index_topk"]
    assert LayerKind.INDEXER not in {g.kind for g in spec(cfg).groups}


def test_dsa_indexer_parameters():
    # per indexer layer: wq_b 1536 -> 64 × 128, wk 7168 -> 128, k_norm weight + bias 2 × 128,
    # weights_proj 7168 -> 64; replicated on every TP rank
    v32, v3 = load_model("deepseek-v3.2"), load_model("deepseek-v3")
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert v32.params.total - v3.params.total == 61 * per_layer
    assert v32.params.replicated - v3.params.replicated == 61 * per_layer
    assert v32.params.mtp - v3.params.mtp == per_layer
    # GLM-5.2 holds indexer weights in its 21 indexer layers only (2048 -> 32 × 128 etc.)
    glm = 2048 * 32 * 128 + 6144 * 128 + 2 * 128 + 6144 * 32
    assert load_model("glm-5").params.total - load_model("glm-5.2").params.total == 57 * glm


def test_dsa_layer_types_name_sparse_attention_layers():
    # a GLM-5.2 config that lists layer_types (the NVFP4 checkpoint's) sizes as the original
    cfg = real("glm-5.2")
    cfg["layer_types"] = ["deepseek_sparse_attention"] * 78
    with_types, plain = spec(cfg), spec(real("glm-5.2"))
    assert [(g.kind, g.layers) for g in with_types.groups] == \
        [(g.kind, g.layers) for g in plain.groups]
# --- Nemotron-H block lists (transformers' NemotronHConfig) and Nemotron-NAS block_configs ---

def _lightning_like():
    # Nemotron-3.5-Lightning's layout: layers_block_type instead of hybrid_override_pattern
    cfg = real("nemotron-3-nano-30b-a3b")
    names = {"M": "mamba", "*": "attention", "E": "moe", "-": "mlp"}
    cfg["layers_block_type"] = [names[c] for c in cfg.pop("hybrid_override_pattern")]
    return cfg


def test_nemotron_h_block_list_reads_as_the_pattern():
    from_list = spec(_lightning_like())
    assert from_list.groups == load_model("nemotron-3-nano-30b-a3b").groups
    # the list wins over a legacy pattern beside it, as in transformers
    cfg = _lightning_like()
    cfg["hybrid_override_pattern"] = "M" * 52
    assert spec(cfg).groups == from_list.groups
    # current names (linear_attention, full_attention) and the layer_types alias read alike
    current = _lightning_like()
    remap = {"mamba": "linear_attention", "attention": "full_attention"}
    current["layer_types"] = [remap.get(t, t) for t in current.pop("layers_block_type")]
    assert spec(current).groups == from_list.groups


def test_nemotron_h_layer_count_comes_from_the_block_list():
    # Nemotron-3 Ultra writes no num_hidden_layers: 108 blocks = 48 Mamba, 48 MoE, 12 attention
    s = load_model("nemotron-3-ultra-550b-a55b")
    assert "num_hidden_layers" not in real("nemotron-3-ultra-550b-a55b")
    assert {g.kind: g.count for g in s.groups if not g.mtp} == {LayerKind.FULL: 12,
                                                               LayerKind.MAMBA: 48}
    assert s.hidden_layers == 108 and s.cacheless_layers == 48


@pytest.mark.parametrize(("key", "value", "message"), [
    ("layers_block_type", ["mamba", "conv"], r"layers_block_type\[1\] is 'conv'"),
    ("layers_block_type", "MEM*", "must be a list of block types"),
    ("num_hidden_layers", 51, "lists 52 layers but num_hidden_layers is 51"),
    ("num_hidden_layers", float("inf"), "must be a finite integer, got Infinity"),
])
def test_nemotron_h_bad_block_lists_are_named(key, value, message):
    cfg = _lightning_like()
    cfg[key] = value
    with pytest.raises(ConfigError, match=message):
        spec(cfg)
    with pytest.raises(ConfigError, match="needs 'layers_block_type'"):
        spec({k: v for k, v in _lightning_like().items() if k != "layers_block_type"})


def test_nemotron_h_mtp_step_from_mtp_layers_block_type():
    # Ultra: one MTP step of ["attention", "moe"]: one more attention layer (2 KV heads × 128),
    # numbered after the 108 decoder blocks, cached only with --mtp
    s = load_model("nemotron-3-ultra-550b-a55b")
    (mtp,) = [g for g in s.groups if g.mtp]
    assert (mtp.kind, mtp.layers, mtp.n_kv_heads, mtp.head_dim_k) == (LayerKind.FULL, (108,), 2, 128)
    # Super spells the step as mtp_hybrid_override_pattern "*E" (the legacy key)
    (mtp,) = [g for g in load_model("nemotron-3-super-120b-a12b").groups if g.mtp]
    assert mtp.layers == (88,)
    # a step of Mamba blocks is refused (vLLM's nemotron_h_mtp.py builds * and E only)
    cfg = real("nemotron-3-ultra-550b-a55b")
    cfg["mtp_layers_block_type"] = ["mamba", "moe"]
    with pytest.raises(ConfigError, match="MTP step of Mamba blocks"):
        spec(cfg)


def test_nemotron_h_latent_moe_and_shared_expert_weights():
    h, vocab, heads, kv, hd = 4096, 131072, 32, 2, 128
    # Super: 512 experts of relu² (up + down) in the 1024-wide latent, 2688 wide; the shared
    # expert (moe_shared_expert_intermediate_size 5376) and router read the full 4096;
    # fc1/fc2_latent_proj 2 × 4096 × 1024
    moe = 512 * 2 * 1024 * 2688 + 2 * h * 5376 + h * 512 + 2 * h * 1024
    # Mamba-2: in_proj to 2·8192 + 2·8·128 + 128, conv (8192 + 2048) × 4, out_proj
    mamba = h * (2 * 8192 + 2 * 8 * 128 + 128) + (8192 + 2048) * 4 + 8192 * h
    attn = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    layers = 40 * moe + 40 * mamba + 8 * attn + 88 * 2 * h
    s = load_model("nemotron-3-super-120b-a12b")
    assert s.params.total == layers + 2 * vocab * h
    # the MTP step: attention + MoE, each with its norm, eh_proj 2h × h, three norms
    assert s.params.mtp == (attn + h) + (moe + h) + 2 * h * h + 3 * h
    # every tensor-parallel rank holds the latent projections whole (ReplicatedLinear in
    # vLLM's and SGLang's nemotron_h.py), with the routers and norms
    assert s.params.replicated == 40 * (h * 512 + 2 * h * 1024) + 88 * 2 * h
    # Nano has no latent (moe_latent_size absent): experts at the full 2688 width
    nano = load_model("nemotron-3-nano-30b-a3b").params
    assert nano.experts == 23 * 128 * 2 * 2688 * 1856
    # the sizes the models are named by: Nano's card gives 31.6B in all, Super is "120B"
    assert abs(nano.total - 31.6e9) / 31.6e9 < 0.005
    assert abs(s.params.total - 120e9) / 120e9 < 0.01


def test_nemotron_nas_block_configs_size_each_layer():
    s = load_model("llama-3.3-nemotron-super-49b")
    # 49 layers with attention (64 heads // n_heads_in_group 8 = 8 KV heads × 128),
    # 31 with a no-op attention: no cache
    (g,) = s.groups
    assert (g.kind, g.count, g.n_kv_heads, g.head_dim_k) == (LayerKind.FULL, 49, 8, 128)
    assert s.cacheless_layers == 31 and s.hidden_layers == 80
    assert "num_key_value_heads" not in s.defaulted


def test_nemotron_nas_weights_follow_ffn_mult():
    h, vocab = 8192, 128256
    cfg = real("llama-3.3-nemotron-super-49b")
    attn = 2 * h * 64 * 128 + 2 * h * 8 * 128 + h
    total = h + 2 * vocab * h
    for block in cfg["block_configs"]:
        if not block["attention"]["no_op"]:
            total += attn
        # DeciLM: int(2 · ffn_mult · hidden / 3) rounded up to a multiple of 256; ffn_mult
        # 5.25 gives 28672, 2.625 14336, 1.3125 7168, 0.5 2816 (2730 rounded up)
        width = -(-int(2 * block["ffn"]["ffn_mult"] * h / 3) // 256) * 256
        total += 3 * h * width + h
    assert load_model("llama-3.3-nemotron-super-49b").params.total == total
    # about 49.9B, as the model is named
    assert abs(total - 49.9e9) / 49.9e9 < 0.005


def test_nemotron_nas_linear_attention_and_bad_blocks():
    cfg = real("llama-3.3-nemotron-super-49b")
    cfg["block_configs"][0]["attention"].update(no_op=False, replace_with_linear=True,
                                                n_heads_in_group=None)
    s = spec(cfg)
    assert s.groups[0].count == 48 and s.linear_attention_layers == 1
    for change, message in [
            (lambda b: b["ffn"].update(ffn_mult=float("nan")), "must be a finite number, got NaN"),
            (lambda b: b["attention"].update(n_heads_in_group=7), "must divide num_attention_heads"),
            (lambda b: b["attention"].update(window_length=4096), "window_length is set")]:
        bad = real("llama-3.3-nemotron-super-49b")
        change(bad["block_configs"][1])
        with pytest.raises(ConfigError, match=message):
            spec(bad)
    short = real("llama-3.3-nemotron-super-49b")
    short["block_configs"] = short["block_configs"][:79]
    with pytest.raises(ConfigError, match="one per layer \\(80\\), got 79"):
        spec(short)
# --- Gemma 4, MiMo-V2, Kimi-K3, Step-3.7 ------------------------------------------------------

def _groups(spec):
    return {(g.kind, g.n_kv_heads, g.head_dim_k, g.head_dim_v, g.window): g.layers
            for g in spec.groups}


def test_gemma4_full_layers_use_the_global_heads_and_width():
    spec = load_model("gemma-4-26b-a4b")
    # layer_types: every 6th layer full; full layers take num_global_key_value_heads 2 and
    # global_head_dim 512 (attention_k_eq_v), sliding ones num_key_value_heads 8 × head_dim 256
    assert _groups(spec) == {
        (LayerKind.FULL, 2, 512, 512, None): (5, 11, 17, 23, 29),
        (LayerKind.SLIDING, 8, 256, 256, 1024): tuple(i for i in range(30) if i % 6 != 5),
    }
    spec31 = load_model("gemma-4-31b-it")
    assert {(g.kind, g.n_kv_heads, g.head_dim_k, g.count) for g in spec31.groups} == {
        (LayerKind.FULL, 4, 512, 10), (LayerKind.SLIDING, 16, 256, 50)}


def test_gemma4_moe_counts_the_dense_mlp_beside_the_experts():
    spec = load_model("gemma-4-26b-a4b")
    # 30 MoE layers of 128 experts × 3 × 2816 × 704; the dense MLP (intermediate 2112) runs on
    # every token beside the top-8 experts
    assert spec.params.experts == 30 * 128 * 3 * 2816 * 704
    assert spec.params.active_experts == 30 * 8 * 3 * 2816 * 704
    dense = load_model("gemma-4-31b-it")
    assert dense.params.experts == 0


def _gemma4_e2b(**over):
    # the published E2B text geometry: 35 layers, every 5th full, 1 KV head, the last 20
    # layers sharing the KV of earlier ones, per-layer embeddings of 256
    types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(35)]
    text = {"model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 35,
            "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
            "global_head_dim": 512, "num_global_key_value_heads": None, "attention_k_eq_v": False,
            "sliding_window": 512, "vocab_size": 262144, "vocab_size_per_layer_input": 262144,
            "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 20,
            "use_double_wide_mlp": True, "intermediate_size": 6144, "layer_types": types,
            "tie_word_embeddings": True}
    text.update(over)
    return {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"],
            "text_config": text}


def test_gemma4_kv_shared_layers_hold_no_cache():
    spec = spec_from_config(_gemma4_e2b(), name="e2b", source="test")
    # layers 0..14 cache: full 4, 9, 14 (1 head × 512, no k_eq_v: num_key_value_heads) and 12
    # sliding layers of 1 × 256; layers 15..34 read those caches (vLLM kv_sharing_target)
    assert _groups(spec) == {
        (LayerKind.FULL, 1, 512, 512, None): (4, 9, 14),
        (LayerKind.SLIDING, 1, 256, 256, 512): (0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13),
    }
    assert spec.cacheless_layers == 20 and spec.decoder_layers == 35
    from kvcore import bytes_per_token
    assert bytes_per_token(spec) == (3 * 1024 + 12 * 512) * 2
    # the per-layer embedding table (262144 × 35 × 256) is counted on its own, beside the
    # tied token embedding (262144 × 1536), which it must not make look untied
    no_ple = spec_from_config(_gemma4_e2b(hidden_size_per_layer_input=0), name="x", source="t")
    assert spec.params.per_layer_embedding == 262144 * 35 * 256
    assert spec.params.embedding == no_ple.params.embedding == 262144 * 1536
    assert no_ple.params.per_layer_embedding == 0


def test_a_layer_that_attends_over_another_layers_cache_reads_it_again():
    # Gemma 4 E2B: of the 20 KV-shared layers 4 are full (they read layer 14's cache) and 16
    # sliding (layer 13's). A decode step reads the 3 full layers' caches 7 times over and the
    # 12 sliding layers' 28 times; the cache held is the same
    from kvcore.plan import attention_flops

    spec = spec_from_config(_gemma4_e2b(), name="e2b", source="test")
    assert spec.cache_readers() == {14: 4, 13: 16}
    size = cache_size(spec, 8192, 2)
    full = 2 * 8192 * (512 + 512) * 2  # a full layer's K + V, two sequences
    sliding = 2 * 512 * (256 + 256) * 2
    assert size.kv_bytes == 3 * full + 12 * sliding
    assert size.read_bytes == 7 * full + 28 * sliding
    # and each of those layers' 8 query heads multiplies the entries it reads
    assert attention_flops(spec, size) == 2 * 8 * 2 * (7 * 8192 * 1024 + 28 * 512 * 512)
    # without sharing, a step reads what is held
    plain = spec_from_config(_gemma4_e2b(num_kv_shared_layers=0), name="x", source="t")
    held = cache_size(plain, 8192, 2)
    assert plain.cache_readers() == {} and held.read_bytes == held.kv_bytes


def test_gemma4_audio_tower_is_named_as_not_counted():
    config = _gemma4_e2b()
    assert spec_from_config(config, name="x", source="t").notes == ()
    config["audio_config"] = {"model_type": "gemma4_audio", "hidden_size": 1024,
                              "num_hidden_layers": 12}
    spec = spec_from_config(config, name="x", source="t")
    assert spec.notes == ("the audio tower (audio_config) is not counted in the weights",)
    assert spec.params.encoder == 0


def test_gemma4_k_eq_v_needs_the_global_kv_heads():
    with pytest.raises(ConfigError, match="num_global_key_value_heads"):
        spec_from_config(_gemma4_e2b(attention_k_eq_v=True), name="x", source="t")


def test_mimo_v2_flash_kinds_heads_and_widths():
    spec = load_model("mimo-v2-flash")
    full = (0, 5, 11, 17, 23, 29, 35, 41, 47)
    # hybrid_layer_pattern 0 = full (4 KV heads, K 192, V 128), 1 = sliding over
    # sliding_window_size 128 (swa 8 KV heads, K 192, V 128)
    assert _groups(spec) == {
        (LayerKind.FULL, 4, 192, 128, None): full,
        (LayerKind.SLIDING, 8, 192, 128, 128): tuple(i for i in range(48) if i not in full),
    }
    # moe_layer_freq: layer 0 dense, 47 MoE layers of 256 experts × 3 × 4096 × 2048
    assert spec.params.experts == 47 * 256 * 3 * 4096 * 2048
    assert spec.checkpoint_weights == "fp8"


def test_mimo_v2_hybrid_layer_pattern_must_list_every_layer():
    config = _config("mimo-v2-flash")
    config["hybrid_layer_pattern"] = config["hybrid_layer_pattern"][:-1]
    with pytest.raises(ConfigError, match="hybrid_layer_pattern"):
        spec_from_config(config, name="x", source="t")


def _config(model_id):
    return next(e for e in model_catalog() if e.id == model_id).config()


def test_kimi_k3_sizes_like_kimi_linear_without_a_head_dim():
    spec = load_model("kimi-k3")
    # hidden 7168 / 96 heads is no whole number, and neither MLA nor KDA needs it
    assert [(g.kind, g.count) for g in spec.groups] == [(LayerKind.MLA, 24), (LayerKind.LINEAR, 69)]
    mla = spec.groups[0]
    assert mla.head_dim_k == 512 + 64 and mla.layers[0] == 3 and mla.layers[-1] == 92
    kda = spec.groups[1]
    assert kda.state_values == 96 * 128 * 128 + 3 * 3 * 96 * 128
    assert spec.ssm_dtype_bytes == 4
    # latent MoE: 92 MoE layers of 896 experts × 3 × 3584 (routed_expert_hidden_size) × 3072,
    # plus each layer's 7168 → 3584 → 7168 projections, in MXFP4 (the quantization ignores
    # attention, shared experts, dense MLPs and the head)
    assert spec.params.experts == 92 * (896 * 3 * 3584 * 3072 + 2 * 7168 * 3584)
    assert spec.params.active_experts == 92 * (16 * 3 * 3584 * 3072 + 2 * 7168 * 3584)
    assert spec.checkpoint_weights == "mxfp4_moe"
    assert spec.architecture == "KimiK3ForConditionalGeneration"


def test_step37_layers_and_attention_other_setting():
    spec = load_model("step-3.7-flash")
    # 12 full + 33 sliding (window 512) layers of 8 KV heads × 128; the 3 draft layers
    # (num_nextn_predict_layers) full attention where the config lists no types for them
    assert [(g.kind, g.n_kv_heads, g.head_dim_k, g.window, g.layers, g.mtp)
            for g in spec.groups] == [
        (LayerKind.FULL, 8, 128, None, tuple(range(0, 45, 4)), False),
        (LayerKind.SLIDING, 8, 128, 512, tuple(i for i in range(45) if i % 4), False),
        (LayerKind.FULL, 8, 128, None, (45, 46, 47), True)]
    assert spec.notes and "attention_other_setting" in spec.notes[0]
    # the published layout: sliding layers take attention_other_setting's heads (vLLM
    # step3p5.py), layer_types lists the 3 draft layers after the 45 decoder layers
    config = _config("step-3.7-flash")
    config["attention_other_setting"] = {"attention_type": "sliding_attention",
                                         "num_attention_heads": 96, "num_attention_groups": 4,
                                         "head_dim": 64}
    config["layer_types"] = config["layer_types"] + ["sliding_attention"] * 3
    other = spec_from_config(config, name="x", source="t")
    assert {(g.kind, g.n_kv_heads, g.head_dim_k, g.count, g.mtp) for g in other.groups} == {
        (LayerKind.FULL, 8, 128, 12, False), (LayerKind.SLIDING, 4, 64, 33, False),
        (LayerKind.SLIDING, 4, 64, 3, True)}
    assert not other.notes
    # 96 query heads × 64 on the 33 sliding layers instead of 64 × 128: q and o projections
    assert spec.params.total - other.params.total == 33 * (
        2 * 4096 * 64 * 128 + 2 * 4096 * 8 * 128 - 2 * 4096 * 96 * 64 - 2 * 4096 * 4 * 64)


# --- Gemma-3n -------------------------------------------------------------------------------

def _gemma3n(n_layers=35, shared=15, width=16384, **over):
    # Gemma-3n E4B's text geometry (transformers Gemma3nTextConfig's defaults; E2B: 30 layers,
    # 8192-wide MLPs, 10 shared): every 5th layer full, 2 KV heads × 256, window 512, an
    # intermediate_size listed per layer, AltUp of 4, LAuReL rank 64, per-layer inputs of
    # 256 from a 262,144-token table; the MobileNet-v5 vision and conformer audio towers
    types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention"
             for i in range(n_layers)]
    text = {"model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": n_layers,
            "intermediate_size": [width] * n_layers, "num_attention_heads": 8,
            "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 262400,
            "vocab_size_per_layer_input": 262144, "hidden_size_per_layer_input": 256,
            "sliding_window": 512, "max_position_embeddings": 32768, "layer_types": types,
            "num_kv_shared_layers": shared, "laurel_rank": 64, "altup_num_inputs": 4,
            "activation_sparsity_pattern": [0.95] * 10 + [0.0] * (n_layers - 10)}
    text.update(over)
    return {"model_type": "gemma3n", "architectures": ["Gemma3nForConditionalGeneration"],
            "text_config": text, "torch_dtype": "bfloat16",
            "vision_config": {"model_type": "gemma3n_vision", "hidden_size": 2048,
                              "architecture": "mobilenetv5_300m_enc", "vocab_size": 128},
            "audio_config": {"model_type": "gemma3n_audio", "hidden_size": 1536,
                             "conf_num_hidden_layers": 12, "conf_num_attention_heads": 8,
                             "conf_conv_kernel_size": 5, "input_feat_size": 128,
                             "sscp_conv_channel_size": [128, 32],
                             "sscp_conv_kernel_size": [[3, 3], [3, 3]],
                             "sscp_conv_stride_size": [[2, 2], [2, 2]], "vocab_size": 128}}


@pytest.mark.parametrize(("n_layers", "shared", "width"), [(35, 15, 16384), (30, 10, 8192)])
def test_gemma3n_kv_shared_layers_hold_no_cache(n_layers, shared, width):
    spec = spec_from_config(_gemma3n(n_layers, shared, width), name="g3n", source="test")
    # E4B and E2B alike: layers 0..19 cache (the 20 llama.cpp's gemma3n keeps), full 4, 9,
    # 14, 19 and 16 sliding layers, 2 KV heads × 256 each; the last 15 (10) read layer 19's
    # (full) or 18's (sliding) cache: vLLM gemma3n.py kv_sharing_target_layer_name
    assert _groups(spec) == {
        (LayerKind.FULL, 2, 256, 256, None): (4, 9, 14, 19),
        (LayerKind.SLIDING, 2, 256, 256, 512): tuple(i for i in range(19) if i % 5 != 4),
    }
    assert spec.cacheless_layers == spec.kv_shared_layers == shared
    assert spec.decoder_layers == n_layers
    from kvcore import bytes_per_token, marginal_bytes_per_token
    # within the window: 20 layers × 2 heads × (256 + 256) × 2 B = 40,960 B a token; past it
    # the 4 full layers only: 8,192 B (all 35 layers would be 71,680 B)
    assert bytes_per_token(spec) == 20 * 2 * 512 * 2 == 40960
    assert marginal_bytes_per_token(spec) == 4 * 2 * 512 * 2 == 8192
    assert spec.intermediate_size == width


def test_gemma3n_parameters_match_the_published_checkpoints():
    e4b = spec_from_config(_gemma3n(), name="e4b", source="test").params
    # one E4B layer: attention q, o 2048 × 2048 and k, v 2048 × 512 (10,485,760); MLP
    # 3 × 2048 × 16,384 (100,663,296); input and post-attention norms 2 × 2048; q, k norms
    # 2 × 256, pre/post-feedforward norms 2 × 2048, LAuReL 2 × 2048 × 64 + 2048, AltUp
    # 4 × 4 + 4 × 16 + 2048 × 4 + 2 × 2048 (281,168 in all); per-layer input gate and
    # projection 2 × 2048 × 256 + its norm 2048 (1,050,624): 112,484,944 × 35
    layer = 10485760 + 100663296 + 4096 + 281168 + 1050624
    assert layer == 112484944
    # model: token table 262,400 × 2048 (tied), per-layer table 262,144 × 35 × 256, its
    # projection 2048 × 8960 + norm 256, AltUp projections 2 × 3 × 2048², final norm 2048
    text = (35 * layer + 262400 * 2048 + 262144 * 35 * 256 + 2048 * 8960 + 256
            + 2 * 3 * 2048 ** 2 + 2048)
    assert text == 6866696688
    # vision: mobilenetv5_300m_enc 294,284,096 + embedder 128 × 2048 + 2 × 2048 + 2048²;
    # audio: subsampling convs 1 × 128 × 9 + 128 and 128 × 32 × 9 + 32, projection
    # 32 channels × 32 bins × 1536; 12 conformer blocks of 2 feed-forwards (2 × 1536 × 6144
    # + 2 × 1536 each), attention 5 × 1536² + 192 + 2 × 1536, light conv 1536 × 3072 +
    # 1536 × 5 + 1536² + 2 × 1536, a norm 1536 (56,644,800); embedder 128 × 1536 + 2 × 1536
    # + 1536 × 2048
    vision = 294284096 + 128 * 2048 + 2 * 2048 + 2048 * 2048
    block = 2 * (2 * 1536 * 6144 + 2 * 1536) + 5 * 1536 ** 2 + 192 + 2 * 1536 + (
        1536 * 3072 + 1536 * 5 + 1536 ** 2 + 2 * 1536) + 1536
    assert block == 56644800
    audio = (1152 + 128 + 36864 + 32 + 32 * 32 * 1536 + 12 * block
             + 128 * 1536 + 2 * 1536 + 1536 * 2048)
    assert e4b.encoder == vision + audio == 983438688
    # 7,850,135,376: the published google/gemma-3n-E4B-it checkpoint is 7.85B parameters
    assert e4b.total == text + vision + audio == 7850135376
    assert e4b.per_layer_embedding == 262144 * 35 * 256
    assert e4b.embedding == 262400 * 2048
    # E2B: 30 layers of 3 × 2048 × 8192 MLPs and a 262,144 × 30 × 256 table: 5,439,595,456
    # against the published 5.44B
    e2b = spec_from_config(_gemma3n(30, 10, 8192), name="e2b", source="test").params
    layer2 = 10485760 + 3 * 2048 * 8192 + 4096 + 281168 + 1050624
    assert e2b.total == (30 * layer2 + 262400 * 2048 + 262144 * 30 * 256 + 2048 * 7680 + 256
                         + 2 * 3 * 2048 ** 2 + 2048 + 983438688) == 5439595456


def test_gemma3n_per_layer_mlp_widths():
    # a MatFormer slice: layers of 8192 and 16384 (MLP 3 × 2048 × width each)
    widths = [8192] * 20 + [16384] * 15
    spec = spec_from_config(_gemma3n(intermediate_size=widths), name="x", source="t")
    full = spec_from_config(_gemma3n(), name="x", source="t")
    assert full.params.total - spec.params.total == 20 * 3 * 2048 * 8192
    assert spec.intermediate_size == 16384
    with pytest.raises(ConfigError, match="one positive width per layer \\(35\\)"):
        spec_from_config(_gemma3n(intermediate_size=[16384] * 34), name="x", source="t")
    with pytest.raises(ConfigError, match="mobilenetv5_300m_enc"):
        bad = _gemma3n()
        bad["vision_config"]["architecture"] = "vit_so400m"
        spec_from_config(bad, name="x", source="t")


def test_gemma4_e4b_kv_shared_layers_hold_no_cache():
    # Gemma 4 E4B: 42 layers, every 6th full, 2 KV heads (num_global_key_value_heads null: the
    # full layers keep num_key_value_heads), the last 18 sharing; layers 0..23 own a cache
    types = ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(42)]
    spec = spec_from_config(_gemma4_e2b(
        hidden_size=2560, num_hidden_layers=42, num_key_value_heads=2, num_kv_shared_layers=18,
        use_double_wide_mlp=False, intermediate_size=10240, layer_types=types),
        name="e4b", source="t")
    assert _groups(spec) == {
        (LayerKind.FULL, 2, 512, 512, None): (5, 11, 17, 23),
        (LayerKind.SLIDING, 2, 256, 256, 512): tuple(i for i in range(23) if i % 6 != 5),
    }
    from kvcore import bytes_per_token, marginal_bytes_per_token
    # 4 full × 2 × (512 + 512) × 2 B + 20 sliding × 2 × (256 + 256) × 2 B = 57,344 B within
    # the window, 16,384 past it
    assert bytes_per_token(spec) == 4 * 2 * 1024 * 2 + 20 * 2 * 512 * 2 == 57344
    assert marginal_bytes_per_token(spec) == 16384
    assert spec.kv_shared_layers == 18
    assert spec.params.per_layer_embedding == 262144 * 42 * 256


@pytest.mark.parametrize(("n_layers", "shared", "width"), [(35, 15, 16384), (30, 10, 8192)])
def test_gemma3n_modules_add_up_to_its_parameter_count(n_layers, shared, width):
    # the per-module breakdown a quantized checkpoint is priced by covers every parameter:
    # LAuReL, AltUp, the per-layer table and projections included
    p = spec_from_config(_gemma3n(n_layers, shared, width), name="g3n", source="test").params
    assert sum(m.params for m in p.modules) == p.total
    assert sum(m.active for m in p.modules) == p.active


# --- Laguna (poolside) ----------------------------------------------------------------------

def _laguna_attention(hidden, heads, kv=8, hd=128, gate=1):
    # q (heads × 128) and o, k and v (8 × 128 each), g_proj (hidden -> heads × gate), the q and k
    # RMSNorms over head_dim
    return 2 * hidden * heads * hd + 2 * hidden * kv * hd + hidden * heads * gate + 2 * hd


@pytest.mark.parametrize(("model", "hidden", "layers", "swa_heads", "inter", "moe_inter",
                          "total", "active"), [
    # S-2.1: 12 full layers of 48 query heads, 36 sliding of 72; layer 0 dense (12,288 wide),
    # 47 MoE layers of 256 experts × 1,024 (10 active) + one shared expert of 1,024, a
    # 3072 × 256 router and its 256-value score-correction bias; untied 100,352 × 3072
    # embedding and head; two norms a layer and the final norm
    ("laguna-s-2.1", 3072, 48, 72, 12288, 1024, 117_561_977_600, 8_140_974_848),
    # XS.2: 10 full layers of 48, 30 sliding of 64; layer 0 dense (8,192) by mlp_layer_types
    # alone (the config has no mlp_only_layers); 39 MoE layers of 256 × 512 (8 active)
    ("laguna-xs.2", 2048, 40, 64, 8192, 512, 33_442_617_088, 2_811_614_976),
])
def test_laguna_parameters_term_by_term(model, hidden, layers, swa_heads, inter, moe_inter,
                                        total, active):
    spec = load_model(model)
    top_k = 10 if model == "laguna-s-2.1" else 8
    full = layers // 4
    attn = (full * _laguna_attention(hidden, 48)
            + (layers - full) * _laguna_attention(hidden, swa_heads))
    moe_fixed = 3 * hidden * moe_inter + hidden * 256 + 256  # shared expert, router, bias
    experts = 256 * 3 * hidden * moe_inter
    dense = 3 * hidden * inter
    rest = 2 * hidden * layers + 2 * 100352 * hidden + hidden
    assert spec.params.total == attn + (layers - 1) * (experts + moe_fixed) + dense + rest == total
    # active: the routed experts a token runs, the head counted once
    routed = top_k * 3 * hidden * moe_inter
    assert spec.params.active == (attn + (layers - 1) * (routed + moe_fixed) + dense
                                  + 2 * hidden * layers + 100352 * hidden + hidden) == active
    assert sum(m.params for m in spec.params.modules) == total
    # the cache: 8 KV heads × 128 on every layer, the sliding ones over 512 tokens
    (f, s) = spec.groups
    assert (f.kind, f.count, f.n_kv_heads, f.head_dim_k) == ("full", full, 8, 128)
    assert (s.kind, s.count, s.n_kv_heads, s.window) == ("sliding", layers - full, 8, 512)
    q = {m.names[0]: m.params for m in spec.params.modules}
    assert q["layers.0.self_attn.q_proj"] == hidden * 48 * 128
    assert q["layers.1.self_attn.q_proj"] == hidden * swa_heads * 128
    assert q["layers.1.self_attn.g_proj"] == hidden * swa_heads
    assert "layers.0.mlp.gate_proj" in q and "layers.0.mlp.experts" not in q


def test_laguna_fp8_checkpoints_priced_module_by_module():
    from kvcore import weights_for
    # S-2.1: only the routed experts are fp8 (1 byte + a bf16 scale per 128 × 128 block:
    # 3072 × 1024 is 24 × 8 blocks); the ignore list keeps attention, g_proj, the router,
    # the shared experts, layer 0's MLP and lm_head in bf16
    experts = 47 * 256 * 3 * 3072 * 1024
    fp8 = experts + 47 * 256 * 3 * 24 * 8 * 2
    assert weights_for(load_model("laguna-s-2.1")).bytes == \
        fp8 + (117_561_977_600 - experts) * 2 == 121_589_618_176
    # XS.2 quantizes every linear layer but attention, g_proj and the router: the experts
    # (2048 × 512: 16 × 4 blocks), the shared experts and layer 0's 2048 × 8192 MLP (16 × 64)
    q8 = 39 * (256 * 3 + 3) * 2048 * 512 + 3 * 2048 * 8192
    scales = 39 * (256 * 3 + 3) * 16 * 4 * 2 + 3 * 16 * 64 * 2
    assert weights_for(load_model("laguna-xs.2")).bytes == \
        q8 + scales + (33_442_617_088 - q8) * 2 == 35_309_125_760
    # every exclusion names a module kvplan counts
    assert not any("exclusions" in n for n in load_model("laguna-s-2.1").weight_notes)


def _laguna_cfg(**over):
    cfg = copy.deepcopy(real("laguna-xs.2"))
    cfg.pop("quantization_config")
    cfg.update(over)
    return cfg


def test_laguna_per_element_gate_and_no_gate():
    # gating "per-element": g_proj gives one gate a channel (vLLM LagunaAttention: heads × 128)
    per_head = spec(_laguna_cfg()).params.total
    per_elem = spec(_laguna_cfg(gating="per-element")).params.total
    assert per_elem - per_head == 2048 * 127 * (10 * 48 + 30 * 64)
    assert per_head - spec(_laguna_cfg(gating=False)).params.total == 2048 * (10 * 48 + 30 * 64)


@pytest.mark.parametrize(("over", "message"), [
    ({"gating_types": ["per_element"] * 40}, "'gating_types' must list per_head"),
    ({"mlp_only_layers": [0, 1]}, "'mlp_layer_types' says layer 1 is 'sparse'"),
    ({"decoder_sparse_step": 2}, "'mlp_layer_types' says layer 2 is 'sparse'"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention"),
    ({"gating": "sigmoid"}, "'gating' is 'sigmoid'"),
    ({"num_attention_heads_per_layer": [48] * 39}, "num_attention_heads_per_layer"),
    ({"num_attention_heads_per_layer": [48] * 39 + [60]}, r"\[39\] \(60\) must be a multiple"),
    ({"mlp_layer_types": ["dense"] * 39}, "'mlp_layer_types' must list"),
])
def test_laguna_fields_kvplan_cannot_size_are_refused(over, message):
    with pytest.raises(ConfigError, match=message):
        spec(_laguna_cfg(**over))


def test_laguna_mlp_only_layers_that_agree_are_read():
    # S-2.1 gives mlp_only_layers [0] and decoder_sparse_step 1 beside mlp_layer_types
    base = spec(_laguna_cfg()).params.total
    assert spec(_laguna_cfg(mlp_only_layers=[0], decoder_sparse_step=1)).params.total == base


# --- MoE layer rules of ERNIE-4.5 and LFM2-MoE; Voxtral's audio tower ------------------------

def _ernie45_21b(**over):
    # ERNIE-4.5-21B-A3B's geometry: 28 layers, experts in layers 1..27, 64 routed (6 a token)
    # of 1,536 and 2 shared, tied 103,424 × 2,560 embedding
    cfg = {"architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe",
           "hidden_size": 2560, "intermediate_size": 12288, "moe_intermediate_size": 1536,
           "num_hidden_layers": 28, "num_attention_heads": 20, "num_key_value_heads": 4,
           "head_dim": 128, "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_k": 6,
           "moe_layer_start_index": 1, "moe_layer_end_index": 27, "moe_layer_interval": 1,
           "vocab_size": 103424, "tie_word_embeddings": True, "hidden_act": "silu"}
    cfg.update(over)
    return cfg


def test_ernie45_moe_layers_shared_experts_and_top_k():
    s = spec(_ernie45_21b())
    h = 2560
    attn = 2 * h * 2560 + 2 * h * 512
    # layer 0 dense (12,288); layers 1..27: 64 experts, one shared MLP of 2 × 1,536
    # (vLLM ernie45_moe.py: moe_intermediate_size × moe_num_shared_experts), the router and its
    # 64-value e_score_correction_bias
    moe_fixed = 3 * h * 3072 + h * 64 + 64
    total = (28 * attn + 3 * h * 12288 + 27 * (64 * 3 * h * 1536 + moe_fixed)
             + 103424 * h + 28 * 2 * h)
    assert s.params.total == total == 21_825_435_328
    # moe_k routes 6 experts a token
    assert s.params.active == total - 27 * 58 * 3 * h * 1536
    # every 2nd layer from 1 to 11: layers 1, 3, ..., 11
    odd = spec(_ernie45_21b(moe_layer_interval=2, moe_layer_end_index=11))
    dense_layers = 28 - 6
    assert odd.params.total == (28 * attn + dense_layers * 3 * h * 12288
                                + 6 * (64 * 3 * h * 1536 + moe_fixed) + 103424 * h + 28 * 2 * h)


def _lfm2_8b(**over):
    # LFM2-8B-A1B's geometry: 24 layers (6 attention, 18 short-conv), the first 2 dense
    cfg = {"model_type": "lfm2_moe", "vocab_size": 65536, "hidden_size": 2048,
           "intermediate_size": 7168, "moe_intermediate_size": 1792, "num_hidden_layers": 24,
           "num_attention_heads": 32, "num_key_value_heads": 8, "conv_L_cache": 3,
           "num_dense_layers": 2, "num_experts": 32, "num_experts_per_tok": 4,
           "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "conv",
                           "full_attention", "conv", "conv", "conv", "full_attention", "conv",
                           "conv", "conv", "full_attention", "conv", "conv", "conv",
                           "full_attention", "conv", "conv", "full_attention", "conv", "conv"]}
    cfg.update(over)
    return cfg


def test_lfm2_moe_dense_layers_tied_embedding_and_expert_bias():
    s = spec(_lfm2_8b())
    h = 2048
    attn = 2 * h * h + 2 * h * 512
    conv = h * 3 * h + h * 3 + h * h
    # layers 0 and 1 dense (7,168); 22 MoE layers of 32 × 1,792 with a router and its 32-value
    # expert_bias; the embedding tied (Lfm2MoeConfig's default)
    moe = 32 * 3 * h * 1792 + h * 32 + 32
    # and the RMSNorms of q and k (q_layernorm, k_layernorm: head_dim 64 each)
    attn += 2 * 64
    total = 6 * attn + 18 * conv + 2 * 3 * h * 7168 + 22 * moe + 65536 * h + 24 * 2 * h
    assert s.params.total == total == 8_339_928_512
    assert s.params.embedding == 65536 * h
    assert spec(_lfm2_8b(num_dense_layers=0)).params.total == \
        total - 2 * 3 * h * 7168 + 2 * moe
    assert spec(_lfm2_8b(use_expert_bias=False)).params.total == total - 22 * 32


def test_voxtral_counts_its_whisper_audio_tower():
    s = load_model("voxtral-mini-3b-2507")
    d, inter = 1280, 5120
    # conv1 128 -> 1280 and conv2 1280 -> 1280 (3 taps, biased); 1,500 positions; 32 layers of
    # q, v, o with biases and k without, fc1/fc2 with biases, two LayerNorms; a final LayerNorm;
    # projector 5,120 -> 3,072 -> 3,072 without biases
    layer = 4 * d * d + 3 * d + 2 * d * inter + inter + d + 4 * d
    audio = (128 * d * 3 + d + d * d * 3 + d + 1500 * d + 32 * layer + 2 * d
             + inter * 3072 + 3072 * 3072)
    assert s.params.encoder == audio == 662_134_784
    # the Llama text model: 30 layers, untied 131,072 × 3,072 embedding and head
    text = 30 * (2 * 3072 * 4096 + 2 * 3072 * 1024 + 3 * 3072 * 8192 + 2 * 3072)
    assert s.params.total == text + 2 * 131072 * 3072 + audio == 4_676_268_032
    assert s.notes == ()


def test_an_audio_tower_not_read_is_named():
    cfg = copy.deepcopy(real("voxtral-mini-3b-2507"))
    cfg["audio_config"]["model_type"] = "whisper"
    s = spec(cfg)
    assert s.params.encoder == 0
    assert s.notes == ("the audio tower (audio_config) is not counted in the weights",)


def test_vision_tower_with_grouped_kv_heads():
    # EXAONE 4.5's tower: 28 layers of 2048, 32 heads but 8 KV heads (k and v 2048 × 512),
    # SwiGLU of 5,120; patch embedding 3 × 2 × 14 × 14 × 2048; merger 8192² + 8192 × 5120
    s = load_model("exaone-4.5-33b")
    layer = 2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 5120 + 4 * 2048
    assert s.params.encoder == 28 * layer + 3 * 2 * 14 * 14 * 2048 + 8192 * 8192 + 8192 * 5120


def test_apertus_mlp_has_no_gate():
    # Apertus-8B: 32 layers of 4096, 32 heads and 8 KV heads × 128; its MLP is up_proj, xIELU,
    # down_proj (21,504 wide, two matrices); untied 131,072 × 4,096 embedding and head
    cfg = {"architectures": ["ApertusForCausalLM"], "model_type": "apertus",
           "hidden_act": "xielu", "hidden_size": 4096, "intermediate_size": 21504,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "qk_norm": True, "tie_word_embeddings": False, "vocab_size": 131072}
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 2 * 4096 * 21504 + 2 * 4096
    assert spec(cfg).params.total == 32 * layer + 2 * 131072 * 4096 == 8_053_325_824


def test_muse_glimmer_gate_and_sandwich_norms():
    # Muse-Glimmer-30B's config (aiconfigurator @397b8ae4, tests/data/configs): 52 layers of
    # 6656, 32 query heads and 2 KV heads × 128; every 4th layer full, the rest a 2048 window
    from pathlib import Path
    path = Path(__file__).parent / "data" / "configs" / "muse-glimmer-30b.json"
    s = spec(json.loads(path.read_text()))
    full, sliding = s.groups
    assert (full.count, full.n_kv_heads, sliding.count, sliding.window) == (13, 2, 39, 2048)
    h, q = 6656, 32 * 128
    # q, o and the sigmoid gate_proj (hidden -> 32 × 128, one gate a channel), k and v of
    # 2 × 128; SwiGLU of 19,968; four norms a layer; untied 202,048 × 6,656 embedding and head;
    # the final norm
    layer = 3 * h * q + 2 * h * 256 + 3 * h * 19968 + 4 * h
    text = 52 * layer + 2 * 202048 * h + h
    assert s.params.total - s.params.encoder == text == 27_854_780_928
    gate = next(m for m in s.params.modules if m.names[0] == "layers.0.self_attn.gate_proj")
    assert gate.params == h * q


def _hunyuan_large(**over):
    # Hunyuan-Large's geometry (not its published config): 64 layers, hidden 6400, 80 query
    # heads of 6400 / 80 = 80, 8 KV heads; 16 experts of intermediate_size (no
    # moe_intermediate_size), top-1, one shared MLP; cross-layer attention in pairs
    cfg = {"architectures": ["HunYuanMoEV1ForCausalLM"], "model_type": "hunyuan",
           "hidden_size": 6400, "intermediate_size": 18304, "num_hidden_layers": 64,
           "num_attention_heads": 80, "num_key_value_heads": 8, "num_experts": 16,
           "moe_topk": 1, "num_shared_expert": 1, "use_mixed_mlp_moe": True,
           "use_qk_norm": True, "use_cla": True, "cla_share_factor": 2, "vocab_size": 128512,
           "tie_word_embeddings": False}
    cfg.update(over)
    return cfg


def test_hunyuan_a13b_per_layer_moe_lists_qk_norm_tied():
    s = load_model("hunyuan-a13b-instruct")
    h = 4096
    # cache: 32 layers × 8 KV heads × (128 + 128) × 2 B (attention_head_dim 128)
    assert bytes_per_token(s) == 32 * 8 * 256 * 2 == 131_072
    assert s.cla_share_factor == 1 and s.kv_shared_layers == 0
    # a layer: q, o 4096 × 4096; k, v 4096 × 1024; query/key_layernorm of 128; 64 experts of
    # 3 × 4096 × 3072 (moe_intermediate_size[i]); router 4096 × 64; the shared MLP
    # intermediate_size × num_shared_expert[i] = 3,072 wide; two norms
    attn = 2 * h * h + 2 * h * 1024 + 2 * 128
    expert = 3 * h * 3072
    layer = attn + 64 * expert + h * 64 + expert + 2 * h
    # tied embedding (128,167 × 4096) once, and the final norm
    assert s.params.total == 32 * layer + 128167 * h + h == 80_393_183_232
    assert s.params.embedding == 128167 * h
    # active: moe_topk[i] = 8 experts a token
    active = 32 * (attn + 8 * expert + h * 64 + expert + 2 * h) + 128167 * h + h
    assert s.params.active == active == 12_747_448_320


def test_hunyuan_per_layer_lists_are_read_layer_by_layer():
    # a list varying by layer: layer 0 takes 2 experts of 1,024, layer 1 one of 2,048 and
    # two shared MLPs of intermediate_size 512
    cfg = _hunyuan_large(num_hidden_layers=2, hidden_size=64, intermediate_size=512,
                         num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                         moe_topk=[2, 1], moe_intermediate_size=[1024, 2048],
                         num_shared_expert=[1, 2], use_cla=False, use_qk_norm=False,
                         vocab_size=100)
    s = spec(cfg)
    h = 64
    attn = 2 * h * h + 2 * h * 32
    layer0 = attn + 4 * 3 * h * 1024 + h * 4 + 3 * h * 512 + 2 * h
    layer1 = attn + 4 * 3 * h * 2048 + h * 4 + 3 * h * 1024 + 2 * h
    assert s.params.total == layer0 + layer1 + 2 * 100 * h + h
    active0 = attn + 2 * 3 * h * 1024 + h * 4 + 3 * h * 512 + 2 * h
    active1 = attn + 1 * 3 * h * 2048 + h * 4 + 3 * h * 1024 + 2 * h
    assert s.params.active == active0 + active1 + 100 * h + h
    with pytest.raises(ConfigError, match="'moe_topk' must be one integer or list one per "
                                          r"layer \(2\), got 3"):
        spec({**cfg, "moe_topk": [1, 1, 1]})
    with pytest.raises(ConfigError, match="use_mixed_mlp_moe"):
        spec({k: v for k, v in cfg.items() if k != "use_mixed_mlp_moe"})


def test_hunyuan_large_cross_layer_attention_caches_every_other_layer():
    s = spec(_hunyuan_large())
    # layers 0, 2, ..., 62 project K and V; layer 2k + 1 reuses layer 2k's (vLLM
    # hunyuan_v1.py: layer_id % cla_share_factor != 0 builds HunYuanCrossAttention)
    (g,) = s.groups
    assert g.layers == tuple(range(0, 64, 2))
    # 32 layers × 8 KV heads × (80 + 80) × 2 B
    assert bytes_per_token(s) == 32 * 8 * 160 * 2 == 81_920
    assert (s.cla_share_factor, s.kv_shared_layers, s.hidden_layers) == (2, 32, 64)
    h = 6400
    # a leader: q, o 6400 × 6400, k, v 6400 × 640, two 80-value norms; a follower: q and o
    # only; every layer: 16 experts and one shared MLP of 3 × 6400 × 18,304, a router, 2 norms
    mlp = 17 * 3 * h * 18304 + h * 16 + 2 * h
    leader = 2 * h * h + 2 * h * 640 + 160 + mlp
    follower = 2 * h * h + 160 + mlp
    assert s.params.total == 32 * (leader + follower) + 2 * 128512 * h + h \
        == 389_520_605_440
    # use_cla false: all 64 layers cache (cla_share_factor alone changes nothing)
    plain = spec(_hunyuan_large(use_cla=False))
    assert bytes_per_token(plain) == 2 * 81_920 and plain.cla_share_factor == 1
    # a decode step reads each cached layer twice: for itself and for the layer after it
    size = cache_size(s, 4096, 1)
    assert s.cache_readers() == {i: 1 for i in range(0, 64, 2)}
    assert size.read_bytes == 2 * size.kv_bytes == 2 * 4096 * 81_920


def test_hunyuan_dense_qk_norm_and_tied_embedding():
    # Hunyuan-7B's geometry: 32 layers, 32 heads of 128, 8 KV heads, 14,336 MLP, tied
    cfg = {"architectures": ["HunYuanDenseV1ForCausalLM"], "model_type": "hunyuan_v1_dense",
           "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "use_qk_norm": True, "use_cla": False, "cla_share_factor": 2,
           "tie_word_embeddings": True, "vocab_size": 128167}
    s = spec(cfg)
    h = 4096
    layer = 2 * h * h + 2 * h * 1024 + 2 * 128 + 3 * h * 14336 + 2 * h
    assert s.params.total == 32 * layer + 128167 * h + h == 7_504_568_320
    assert bytes_per_token(s) == 32 * 8 * 256 * 2


def test_exaone_4_5_mtp_module_shares_the_embedding_and_head():
    # EXAONE 4.5's mtp.* module (vLLM exaone4_5_mtp.py): fc 2·5120 -> 5120, one decoder layer
    # (q, o 5120²; k, v 5120 × 1024; gate, up, down 5120 × 27392; its two layer norms as the
    # model's layers count them) and three norms; embed_tokens and lm_head are the model's
    s = load_model("exaone-4.5-33b")
    layer = 2 * 5120 * 5120 + 2 * 5120 * 1024 + 3 * 5120 * 27392 + 2 * 5120
    assert s.params.mtp == layer + 2 * 5120 * 5120 + 3 * 5120 == 536_110_080
    # counted only with --mtp: bf16, two bytes a parameter
    from kvcore.weights import weights_for
    assert weights_for(s, mtp=True).bytes - weights_for(s).bytes \
        == 2 * 536_110_080


def test_pure_mamba2_reads_its_unprefixed_head_fields():
    # Mamba2Config (Mamba-Codestral-7B): num_heads, head_dim, n_groups, state_size; the heads
    # give d_inner (128 × 64 = 8192), the conv runs over x, B and C (8192 + 2·8·128)
    cfg = {"model_type": "mamba2", "num_hidden_layers": 64, "hidden_size": 4096,
           "vocab_size": 32768, "num_heads": 128, "head_dim": 64, "n_groups": 8,
           "state_size": 128, "conv_kernel": 4, "expand": 2, "tie_word_embeddings": False}
    s = spec(cfg)
    (mamba,) = s.groups
    assert mamba.kind == LayerKind.MAMBA and mamba.count == 64
    assert mamba.state_values == 128 * 64 * 128 + 3 * (8192 + 2 * 8 * 128)
    # in_proj to z, x, B, C and dt; conv; out_proj; embeddings and head untied: 7.28B
    rows = 2 * 8192 + 2 * 8 * 128 + 128
    layer = 4096 * rows + (8192 + 2 * 8 * 128) * 4 + 8192 * 4096
    assert abs(s.params.total - (64 * layer + 2 * 32768 * 4096)) / s.params.total < 0.002


def test_bamba_attention_layers_from_their_indices():
    cfg = {"model_type": "bamba", "num_hidden_layers": 8, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
           "intermediate_size": 128, "attn_layer_indices": [2, 6], "mamba_n_heads": 8,
           "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_d_state": 16,
           "mamba_d_conv": 4, "mamba_expand": 2}
    s = spec(cfg)
    kinds = {g.kind: g.layers for g in s.groups}
    assert kinds == {LayerKind.FULL: (2, 6), LayerKind.MAMBA: (0, 1, 3, 4, 5, 7)}
    mamba = next(g for g in s.groups if g.kind == LayerKind.MAMBA)
    # "auto": 2 × 64 / 8 = 16 a head, d_inner 128
    assert mamba.state_values == 8 * 16 * 16 + 3 * (128 + 2 * 16)
    with pytest.raises(ConfigError, match="attn_layer_indices"):
        spec({**cfg, "attn_layer_indices": "2,6"})


@pytest.mark.parametrize("model_type", ["zamba", "xlstm", "rwkv6", "phi4flash",
                                        "recurrent_gemma", "hrm_text",
                                        "dots3_note_text"])
def test_architectures_kvplan_does_not_model_are_refused_by_name(model_type):
    # their head and layer fields would otherwise read as a decoder of full-attention layers
    cfg = {"model_type": model_type, "num_hidden_layers": 8, "hidden_size": 64,
           "num_attention_heads": 4, "num_heads": 4, "vocab_size": 100,
           "intermediate_size": 128, "sliding_window": 512}
    with pytest.raises(ConfigError, match=f"does not model {model_type}") as e:
        spec(cfg)
    assert e.value.field == "model_type"


def test_smollm3_and_arcee_weights_follow_their_config_classes():
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 256}
    llama = spec({"model_type": "llama", **base}).params.total
    # SmolLM3 ties the head to the embedding when its config leaves the key out
    smol = spec({"model_type": "smollm3", **base})
    assert llama - smol.params.total == 1000 * 64
    assert "tie_word_embeddings" in smol.defaulted
    assert spec({"model_type": "smollm3", **base, "tie_word_embeddings": False}
                ).params.total == llama
    # Arcee (AFM): up_proj and down_proj, no gate
    assert llama - spec({"model_type": "arcee", **base}).params.total == 2 * 64 * 256


def test_bundled_smollm3_ties_its_head_and_weighs_its_published_files():
    s = load_model("smollm3-3b")
    # 36 full layers of 4 KV heads of 128 (no_rope_layers changes positions, not the cache)
    assert bytes_per_token(s) == 36 * 2 * 4 * 128 * 2
    # HuggingFaceTB/SmolLM3-3B's two safetensors files hold 6,150,235,008 bytes with their
    # headers; bfloat16 weights with the head tied to the embedding come within 64 KiB below
    files = 6_150_235_008
    assert 0 <= files - 2 * s.params.total < 64 * 1024
    assert "tie_word_embeddings" in s.defaulted


def test_qwen_omni_plans_its_thinker():
    text = {"model_type": "qwen3_omni_moe_text", "num_hidden_layers": 6, "hidden_size": 64,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "vocab_size": 100, "intermediate_size": 128}
    cfg = {"model_type": "qwen3_omni_moe", "enable_audio_output": True,
           "thinker_config": {"model_type": "qwen3_omni_moe_thinker", "text_config": text,
                              "audio_config": {"model_type": "qwen3_omni_moe_audio_encoder"}},
           "talker_config": {"model_type": "qwen3_omni_moe_talker",
                             "text_config": {**text, "num_hidden_layers": 20}}}
    s = spec(cfg)
    (full,) = s.groups
    assert full.count == 6 and full.n_kv_heads == 2 and full.head_dim_k == 16
    assert any("talker" in n for n in s.notes)
    assert any("audio tower" in n for n in s.notes)


def test_dbrx_reads_its_nested_attention_and_experts():
    # DBRX: 48 query heads, 8 KV heads (attn_config.kv_n_heads), 16 experts of 10,752, top 4
    cfg = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
           "max_seq_len": 32768, "vocab_size": 100352, "tie_word_embeddings": False,
           "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000},
           "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}}
    s = spec(cfg)
    (full,) = s.groups
    assert full.n_kv_heads == 8 and full.head_dim_k == 128 and full.count == 40
    experts = 40 * 16 * 3 * 6144 * 10752
    attention = 40 * (2 * 6144 * 6144 + 2 * 6144 * 1024)
    assert abs(s.params.total - (experts + attention + 2 * 100352 * 6144)) / 132e9 < 0.002
    # the classes' defaults where the nested objects leave a field out: one KV head
    assert spec({**cfg, "attn_config": {}}).groups[0].n_kv_heads == 1


def test_mpt_mlp_width_is_its_expansion_ratio():
    cfg = {"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
           "max_seq_len": 2048, "vocab_size": 50432,
           "attn_config": {"attn_type": "multihead_attention", "alibi": True}}
    s = spec(cfg)
    # MPT-7B: ungated 4 × 4096 MLP, no biases, tied embedding: 6.65B
    layer = 4 * 4096 * 4096 + 2 * 4096 * 16384
    assert abs(s.params.total - (32 * layer + 50432 * 4096)) / s.params.total < 0.001
    assert "expansion_ratio" in s.defaulted and "tie_word_embeddings" in s.defaulted
    wide = spec({**cfg, "expansion_ratio": 8})
    assert wide.params.total - s.params.total == 32 * 2 * 4096 * 4 * 4096
    assert "expansion_ratio" not in wide.defaulted


def test_per_layer_kv_heads_are_refused_not_read_as_one_count():
    cfg = {"model_type": "deci", "hidden_size": 64, "num_attention_heads": 4,
           "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100,
           "num_key_value_heads_per_layer": [4, 2]}
    with pytest.raises(ConfigError, match="num_key_value_heads_per_layer"):
        spec(cfg)


def test_gpt2_takes_its_class_defaults_for_the_mlp_and_the_head():
    # GPT-2 small's config names neither n_inner nor tie_word_embeddings: a 4 × 768 MLP and
    # the head tied to the token embedding, 124M parameters with the position embedding
    cfg = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
           "n_positions": 1024, "vocab_size": 50257}
    s = spec(cfg)
    assert {"intermediate_size", "tie_word_embeddings"} <= set(s.defaulted)
    assert 122e6 < s.params.total < 125e6
    assert spec({**cfg, "n_inner": 1536}).params.total < s.params.total


def test_recurrent_fields_without_known_recurrent_layers_are_refused():
    # a hybrid kvplan does not know (its Mamba fields, no pattern kvplan reads) would
    # otherwise be planned as attention alone
    cfg = {"model_type": "mystery_hybrid", "num_hidden_layers": 8, "hidden_size": 64,
           "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128,
           "mamba_d_state": 16, "mamba_d_conv": 4, "layers_block_type": ["mamba"] * 8}
    with pytest.raises(ConfigError, match=r"recurrent layers \(mamba_d_state, mamba_d_conv, "
                                          r"layers_block_type\).*mystery_hybrid"):
        spec(cfg)
    # the same fields where kvplan knows the pattern (Bamba) plan
    bamba = {**cfg, "model_type": "bamba", "attn_layer_indices": [3], "mamba_n_heads": 8,
             "mamba_d_head": 16, "mamba_expand": 2}
    assert LayerKind.MAMBA in {g.kind for g in spec(bamba).groups}


@pytest.mark.parametrize("field", [{"layer_group_size": 8},
                                   {"hybrid_block_layout": ["t", "m2"] * 4}])
def test_hybrid_patterns_kvplan_does_not_read_are_refused(field):
    # fields that place linear layers (Bailing's layer_group_size, Apriel-H's
    # hybrid_block_layout) in a model_type kvplan does not know: read as attention alone it
    # would be planned wrong
    cfg = {"model_type": "mystery_linear", "num_hidden_layers": 8, "hidden_size": 64,
           "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128, **field}
    with pytest.raises(ConfigError, match=rf"recurrent layers \({next(iter(field))}\)"):
        spec(cfg)


@pytest.mark.parametrize(("model_type", "fields"), [
    ("gptj", {"n_embd": 256, "n_head": 4, "n_layer": 2, "n_inner": None, "rotary_dim": 16}),
    ("codegen", {"n_embd": 256, "n_head": 4, "n_layer": 2, "n_inner": None}),
    ("gpt_neo", {"hidden_size": 256, "num_heads": 4, "num_layers": 2,
                 "intermediate_size": None}),
])
def test_gpt_style_mlps_left_null_are_four_times_hidden_and_ungated(model_type, fields):
    # GPT-J, CodeGen, GPT-Neo: n_inner / intermediate_size None is 4 × hidden, fc_in and
    # fc_out (it had been counted as no MLP at all)
    cfg = {"model_type": model_type, "vocab_size": 1000, "tie_word_embeddings": False, **fields}
    s = spec(cfg)
    mlp = 2 * 2 * 256 * 1024  # two layers of two 256 × 1024 matrices
    attention = 2 * 4 * 256 * 256
    assert 0 <= s.params.total - (mlp + attention + 2 * 1000 * 256) < 0.01 * s.params.total
    assert "intermediate_size" in s.defaulted


def test_mamba1_has_no_mlp_beside_its_mixer():
    # Mamba-1 (mamba-130m): intermediate_size is the mixer's inner width, not an MLP
    cfg = {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24,
           "vocab_size": 50280, "intermediate_size": 1536, "state_size": 16,
           "conv_kernel": 4, "expand": 2, "tie_word_embeddings": True}
    s = spec(cfg)
    # in_proj 768 × 3072, conv 1536 × 4, x_proj 1536 × (48 + 32), dt_proj 48 × 1536,
    # A 1536 × 16, out_proj 1536 × 768: about 129M with the tied embedding
    assert 125e6 < s.params.total < 135e6


def test_vision_towers_read_their_own_widths():
    base = real("qwen2.5-vl-7b-instruct")
    text_only = spec({**base, "vision_config": None}).params.total
    # Qwen2-VL: embed_dim is the tower's width, hidden_size the merger's output (the LLM's)
    v2 = {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4,
          "num_heads": 16, "patch_size": 14, "spatial_merge_size": 2,
          "temporal_patch_size": 2, "hidden_act": "quick_gelu", "in_channels": 3}
    tower = spec({**base, "vision_config": v2}).params.total - text_only
    assert 0.6e9 < tower < 0.75e9  # Qwen2-VL-7B's vision tower: 675M
    # GLM-4.1V: the blocks' MLP is out_hidden_size wide, intermediate_size the merger's
    glm = {"depth": 24, "hidden_size": 1536, "intermediate_size": 13696,
           "out_hidden_size": 4096, "num_heads": 12, "patch_size": 14,
           "spatial_merge_size": 2, "temporal_patch_size": 2, "hidden_act": "silu"}
    from kvcore.hf import _encoder_params
    wide = _encoder_params(glm, 4096, "glm4v_text")
    plain = _encoder_params(glm, 4096, "qwen2_5_vl_text")
    assert plain - wide == 24 * 3 * 1536 * (13696 - 4096)


def test_encoder_decoder_models_are_refused():
    cfg = {"model_type": "t5gemma2", "is_encoder_decoder": True, "num_hidden_layers": 2,
           "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
           "intermediate_size": 128}
    with pytest.raises(ConfigError, match="encoder-decoder") as e:
        spec(cfg)
    assert e.value.field == "is_encoder_decoder"


def test_gemma4_per_layer_config_as_transformers_5_saves_it():
    # the same model with its full layers' head_dim given per layer (per_layer_config, keyed
    # by the zero-padded index) instead of global_head_dim: the same cache, to the byte
    cfg = real("gemma-4-31b-it")
    text = cfg.get("text_config", cfg)
    want = spec(cfg)
    full = [i for g in want.groups if g.kind == LayerKind.FULL for i in g.layers]
    dim = text.pop("global_head_dim")
    text["per_layer_config"] = {f"{i:02d}": {"head_dim": dim} for i in full}
    got = spec(cfg)
    assert [(g.kind, g.layers, g.n_kv_heads, g.head_dim_k, g.head_dim_v) for g in got.groups] \
        == [(g.kind, g.layers, g.n_kv_heads, g.head_dim_k, g.head_dim_v) for g in want.groups]
    assert got.params.total == want.params.total
    assert dim != text["head_dim"]  # without either, the full layers would be sized narrower
    text["per_layer_config"] = {"x5": {"head_dim": dim}}
    with pytest.raises(ConfigError, match="per_layer_config"):
        spec(cfg)


def test_a_mamba_hybrids_linear_attention_layers_are_its_mamba_layers():
    # transformers 5 saves Granite-4.0-H's layer_types as "linear_attention" / "attention"
    cfg = {"model_type": "granitemoehybrid", "num_hidden_layers": 4, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
           "intermediate_size": 128, "mamba_n_heads": 8, "mamba_d_head": 16,
           "mamba_n_groups": 1, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
           "layer_types": ["linear_attention", "attention", "linear_attention", "mamba"]}
    kinds = {g.kind: g.layers for g in spec(cfg).groups}
    assert kinds == {LayerKind.MAMBA: (0, 2, 3), LayerKind.FULL: (1,)}


def test_mlp_layer_types_say_which_layers_hold_experts():
    cfg = real("qwen3-30b-a3b")
    n = cfg["num_hidden_layers"]
    every = spec(cfg).params
    # as a config names them alone (the engines' own fields, where given, are read instead)
    for key in ("mlp_only_layers", "decoder_sparse_step"):
        cfg.pop(key, None)
    cfg["mlp_layer_types"] = ["dense"] * 2 + ["sparse"] * (n - 2)
    two_dense = spec(cfg).params
    # two layers trade their 128 experts and router for one dense MLP of intermediate_size
    hidden, expert, dense = cfg["hidden_size"], cfg["moe_intermediate_size"], \
        cfg["intermediate_size"]
    per_layer = 128 * 3 * hidden * expert + 128 * hidden - 3 * hidden * dense
    assert every.total - two_dense.total == 2 * per_layer
    cfg["mlp_layer_types"] = ["sparse"] * (n - 1)
    with pytest.raises(ConfigError, match="mlp_layer_types"):
        spec(cfg)


@pytest.mark.parametrize(("qc", "weights"), [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "nf4"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True,
      "bnb_4bit_use_double_quant": True}, "nf4_dq"),
    ({"quant_method": "bitsandbytes", "_load_in_8bit": True}, "int8"),
    ({"quant_method": "gptq", "bits": 3, "group_size": 128}, "int3"),
    ({"quant_method": "awq", "bits": 2}, "int2"),
    ({"quant_method": "torchao", "quant_type": "Int4WeightOnlyConfig"}, "int4"),
    ({"quant_method": "fbgemm_fp8"}, "fp8"),
    ({"quant_method": "torchao", "quant_type": "NVFP4InferenceConfig"}, "nvfp4"),
    # AMD Quark's exports (amd/*-FP8-KV, amd/*-MXFP4)
    ({"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp8_e4m3"}}}, "fp8"),
    ({"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp4",
                                                                  "qscheme": "per_group"}}},
     "mxfp4"),
])
def test_pre_quantized_checkpoints_are_priced_in_their_stored_format(qc, weights):
    from kvcore.weights import get_weight_format
    cfg = {**real("llama-3.1-8b"), "quantization_config": qc}
    s = spec(cfg)
    assert s.checkpoint_weights == weights
    assert not any("not one kvplan prices" in n for n in s.weight_notes)
    bits = get_weight_format(weights).bits_per_weight
    assert bits < 16


def test_bnb_double_quant_matches_its_published_checkpoint():
    # unsloth/Meta-Llama-3.1-8B-bnb-4bit (double quantization): model.safetensors 5.70 GB
    import kvcore
    cfg = {**real("llama-3.1-8b"), "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": True,
        "bnb_4bit_quant_type": "nf4"}}
    s = spec(cfg)
    w = kvcore.weights_for(s, "auto")
    assert abs(w.bytes - 5.70e9) / 5.70e9 < 0.03


@pytest.mark.parametrize("qc", [{"quant_method": "hqq", "nbits": 4},
                                {"quant_method": "exl2", "bits": 4.0},
                                {"quant_method": "gptq", "bits": 5}])
def test_a_quantization_kvplan_does_not_price_is_said(qc):
    s = spec({**real("llama-3.1-8b"), "quantization_config": qc})
    assert any("is not one kvplan prices" in n and "--weights" in n for n in s.weight_notes)


def test_xglm_reads_its_own_field_names():
    # XGLM-564M: attention_heads, num_layers, d_model, ffn_dim (fc1/fc2), a tied head
    cfg = {"model_type": "xglm", "vocab_size": 256008, "d_model": 1024, "ffn_dim": 4096,
           "num_layers": 24, "attention_heads": 16, "tie_word_embeddings": True,
           "max_position_embeddings": 2048}
    s = spec(cfg)
    (full,) = s.groups
    assert (full.count, full.n_kv_heads, full.head_dim_k) == (24, 16, 64)
    assert abs(s.params.total - 564_463_616) / 564_463_616 < 0.002


def test_is_moe_false_keeps_the_dense_mlp():
    # DOGE's config carries its expert fields (16,384 experts) with is_moe false
    cfg = {"model_type": "doge", "hidden_size": 1024, "num_hidden_layers": 32,
           "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 2048,
           "num_experts": 16384, "num_experts_per_tok": 64, "is_moe": False,
           "vocab_size": 32768, "tie_word_embeddings": False}
    dense = spec(cfg).params.total
    assert 0.39e9 < dense < 0.41e9  # transformers builds 403M
    assert spec({**cfg, "is_moe": True}).params.total > 10 * dense


def test_muse_spark_experts_work_in_their_latent_width():
    cfg = {"model_type": "muse_spark_text", "hidden_size": 256, "intermediate_size": 512,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 64, "vocab_size": 1000, "moe_intermediate_size": 128,
           "num_local_experts": 8, "num_experts_per_tok": 2, "tie_word_embeddings": False}
    full = spec(cfg).params.total
    latent = spec({**cfg, "moe_hidden_size": 64}).params.total
    # each expert's three matrices narrow from 256 to 64 columns; a projection in and one
    # out (256 × 64 each) join every layer
    assert full - latent == 2 * (8 * 3 * (256 - 64) * 128 - 2 * 256 * 64)


def _resaved_dsv4(cfg):
    """DeepSeek-V4's config as transformers 5 saves it (DeepseekV4Config.__post_init__ folds
    compress_ratios, num_hash_layers and qk_rope_head_dim into its own fields)."""
    out = copy.deepcopy(cfg)
    names = {0: "sliding_attention", 4: "compressed_sparse_attention",
             128: "heavily_compressed_attention"}
    n = out["num_hidden_layers"]
    out["layer_types"] = [names[x] for x in out.pop("compress_ratios")[:n]]
    out["compress_rates"] = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    hashed = out.pop("num_hash_layers")
    out["mlp_layer_types"] = ["hash_moe"] * hashed + ["moe"] * (n - hashed)
    out["partial_rotary_factor"] = out.pop("qk_rope_head_dim") / out["head_dim"]
    return out


@pytest.mark.parametrize("model_id", ["deepseek-v4-flash", "deepseek-v4-pro"])
def test_deepseek_v4_resaved_by_transformers_5_plans_as_its_published_config(model_id):
    published = real(model_id)
    resaved = _resaved_dsv4(published)
    a, b = spec(published), spec(resaved)
    assert a.groups == b.groups and a.params == b.params
    # the MTP layer the re-saved list drops is planned, as published, when asked for
    assert any(g.mtp for g in b.groups)
    # the rates a config gives win over the defaults
    slower = spec({**resaved, "compress_rates": {"compressed_sparse_attention": 4,
                                                 "heavily_compressed_attention": 4}})
    assert {g.ratio for g in slower.groups} == {1, 4}
    with pytest.raises(ConfigError, match="not a DeepSeek-V4 layer type") as e:
        spec({**resaved, "layer_types": ["full_attention"] * resaved["num_hidden_layers"]})
    assert e.value.field == "layer_types"


def test_kimi_linear_resaved_by_transformers_5_plans_as_its_published_config():
    published = real("kimi-linear-48b-a3b-instruct")
    resaved = copy.deepcopy(published)
    lac = resaved.pop("linear_attn_config")
    n = resaved["num_hidden_layers"]
    resaved["layer_types"] = ["full_attention" if i + 1 in lac["full_attn_layers"]
                              else "linear_attention" for i in range(n)]
    resaved.update(linear_num_heads=lac["num_heads"], linear_head_dim=lac["head_dim"],
                   linear_conv_kernel_dim=lac["short_conv_kernel_size"])
    dense = resaved.pop("first_k_dense_replace")
    resaved["mlp_layer_types"] = ["dense"] * dense + ["sparse"] * (n - dense)
    a, b = spec(published), spec(resaved)
    assert a.groups == b.groups and a.params == b.params and b.kda
    assert {g.kind for g in b.groups} == {LayerKind.MLA, LayerKind.LINEAR}
    with pytest.raises(ConfigError, match="not a Kimi-Linear layer type"):
        spec({**resaved, "layer_types": ["sliding_attention"] * n})


@pytest.mark.parametrize("model_id", ["deepseek-v3.2", "glm-5", "glm-5.2"])
def test_dsa_models_resaved_by_transformers_5_read_their_indexed_attention_as_mla(model_id):
    published = real(model_id)
    resaved = copy.deepcopy(published)
    n = resaved["num_hidden_layers"]
    resaved["layer_types"] = ["indexed_attention"] * n
    resaved["head_dim"] = resaved["qk_rope_head_dim"]  # DeepseekV32Config writes it too
    a, b = spec(published), spec(resaved)
    assert a.groups == b.groups and a.params == b.params
    assert {g.kind for g in b.groups} >= {LayerKind.MLA, LayerKind.INDEXER}


def test_indexed_attention_of_other_architectures_is_refused_not_read_as_mla():
    # other architectures' indexed layers (Kolibri's are grouped-query attention under an
    # indexer) are no MLA
    cfg = {"model_type": "someindexed", "num_hidden_layers": 2, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "vocab_size": 100, "intermediate_size": 128,
           "layer_types": ["sliding_attention", "indexed_attention"], "sliding_window": 8}
    with pytest.raises(ConfigError, match="'indexed_attention', a layer type kvplan cannot") as e:
        spec(cfg)
    assert e.value.field == "layer_types"


def test_global_layers_of_a_config_with_an_mla_latent_are_mla_whatever_their_name():
    # legacy dots3 configs and transformers 5's Kimi-Linear name their DSA / MLA layers
    # "full_attention"
    cfg = {"model_type": "somemla", "num_hidden_layers": 2, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 100,
           "intermediate_size": 128, "kv_lora_rank": 32, "qk_rope_head_dim": 8,
           "qk_nope_head_dim": 16, "v_head_dim": 16,
           "layer_types": ["full_attention", "full_attention"]}
    (g,) = spec(cfg).groups
    assert g.kind is LayerKind.MLA and g.head_dim_k == 32 + 8


def test_qwen3_5_attention_is_gated_where_the_config_says_nothing():
    # Qwen3_5TextConfig has no attn_output_gate field (transformers always gates); a config
    # it writes leaves the key out
    cfg = real("qwen3.5-9b")
    text = copy.deepcopy(cfg.get("text_config", cfg))
    assert text.pop("attn_output_gate") is True
    bare = {**cfg, "text_config": text} if "text_config" in cfg else text
    assert spec(bare).params == spec(cfg).params
    off = copy.deepcopy(bare)
    off.get("text_config", off)["attn_output_gate"] = False
    heads, dim = text["num_attention_heads"], text["head_dim"]
    attention = sum(1 for t in text["layer_types"] if t == "full_attention")
    assert spec(bare).params.total - spec(off).params.total == (
        attention * text["hidden_size"] * heads * dim)


def test_ergo_mlps_are_ungated_and_its_dense_layer_reads_its_own_width():
    h, dense, moe, shared, experts, vocab = 64, 512, 32, 48, 4, 100
    cfg = {"model_type": "ergo", "num_hidden_layers": 2, "hidden_size": h,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "vocab_size": vocab, "first_dense_intermediate_size": dense, "num_dense_blocks": 1,
           "moe_intermediate_size": moe, "shared_intermediate_size": shared,
           "num_experts": experts, "num_experts_per_tok": 2, "tie_word_embeddings": False,
           "mlp_layer_types": ["dense", "sparse"]}
    p = spec(cfg).params
    attention = 2 * (h * 4 * 16 + 2 * h * 2 * 16 + 4 * 16 * h)
    mlps = 2 * h * dense + experts * 2 * h * moe + 2 * h * shared + h * experts
    # beyond the matrices, a few norms of hidden_size
    assert 0 < p.total - (attention + mlps + 2 * vocab * h) <= 5 * h


@pytest.mark.parametrize(("model_type", "fields", "width"), [
    # CTRL's dff and CPM-Ant's dim_ff name the MLP width; GPT-NeoX-Japanese gives a multiple
    ("ctrl", {"dff": 256}, 256),
    ("cpmant", {"dim_ff": 256}, 256),
    ("gpt_neox_japanese", {"intermediate_multiple_size": 2}, 2 * 64),
    ("gpt_neox_japanese", {}, 4 * 64),
])
def test_older_mlp_width_fields_are_read(model_type, fields, width):
    base = {"model_type": model_type, "num_hidden_layers": 2, "hidden_size": 64,
            "num_attention_heads": 4, "vocab_size": 100}
    s = spec({**base, **fields})
    assert s.intermediate_size == width
    gated = model_type == "cpmant"
    mlp = next(m for m in s.params.modules if m.names[0].startswith("layers.0.mlp.")
               and m.names[0].endswith("down_proj"))
    assert mlp.params == 64 * width
    mats = sum(1 for m in s.params.modules if m.names[0].startswith("layers.0.mlp."))
    assert mats == (3 if gated else 2)
    # each ties its head to the token embedding
    assert not any(m.role == "head" for m in s.params.modules)


def test_layers_reading_an_earlier_layer_s_kv_are_refused_not_counted_twice():
    cfg = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
           "intermediate_size": 128}
    # an identity list shares nothing
    assert spec({**cfg, "kv_source_layers": [0, 1, 2, 3]}).groups == spec(cfg).groups
    with pytest.raises(ConfigError, match="kv_source_layers") as e:
        spec({**cfg, "kv_source_layers": [0, 0, 2, 2]})
    assert e.value.field == "kv_source_layers"


def test_layers_run_in_loops_are_refused_not_counted_once():
    cfg = {"model_type": "dory", "num_hidden_layers": 4, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
           "intermediate_size": 128}
    assert spec({**cfg, "n_recurrent_loops": 1}).groups == spec(cfg).groups
    with pytest.raises(ConfigError, match="n_recurrent_loops") as e:
        spec({**cfg, "n_recurrent_loops": 2})
    assert e.value.field == "n_recurrent_loops"


def test_ling_3_hybrid_reads_as_kda_and_mla_layers():
    # BailingHybridConfig's defaults (its documented checkpoint, Ling-3.0-Flash)
    n = 42
    cfg = {"model_type": "bailing_hybrid", "vocab_size": 157184, "hidden_size": 2560,
           "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": n,
           "num_attention_heads": 32, "num_key_value_heads": 32, "num_shared_experts": 1,
           "kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64, "v_head_dim": 128,
           "qk_nope_head_dim": 128, "num_experts_per_token": 8, "num_experts": 512,
           "first_k_dense_replace": 2, "tie_word_embeddings": False, "head_dim": 64,
           "num_nextn_predict_layers": 1,
           "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "linear_attention"
                           for i in range(n)],
           "mlp_layer_types": ["dense" if i < 2 else "sparse" for i in range(n)],
           "linear_head_dim": 128, "linear_num_heads": 32, "linear_conv_kernel_dim": 4}
    s = spec(cfg)
    kinds = {g.kind: g for g in s.groups if not g.mtp}
    assert kinds[LayerKind.MLA].count == 7 and kinds[LayerKind.MLA].head_dim_k == 512 + 64
    linear = kinds[LayerKind.LINEAR]
    assert linear.count == 35
    assert linear.state_values == 32 * 128 * 128 + 3 * 3 * 4096
    # BailingHybridForCausalLM on the meta device: 124,414,191,072 (the MLA layers' per-head
    # output gate, 7 × 81,920, is not counted)
    assert abs(s.params.total - 124_414_191_072) <= 600_000


def test_hy4_keeps_indexer_keys_where_its_list_says_full():
    # HYV4Config's defaults (its documented checkpoint, Hy4-preview)
    n = 34
    types = ["full", "full"] + ["shared", "shared", "shared", "full"] * 8
    cfg = {"model_type": "hy_v4", "vocab_size": 120832, "hidden_size": 2816,
           "intermediate_size": 6912, "moe_intermediate_size": 768, "num_hidden_layers": n,
           "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 64,
           "tie_word_embeddings": False, "n_routed_experts": 256, "n_shared_experts": 1,
           "num_experts_per_tok": 8, "q_lora_rank": 1536, "kv_lora_rank": 512,
           "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
           "mlp_layer_types": ["dense"] + ["sparse"] * (n - 1),
           "layer_types": ["indexed_attention"] * n, "index_topk": 2048, "index_head_dim": 128,
           "index_n_heads": 16, "indexer_types": types, "hc_mult": 4}
    s = spec(cfg)
    groups = {g.kind: g for g in s.groups}
    assert groups[LayerKind.MLA].count == n and groups[LayerKind.MLA].read_limit == 2048
    assert groups[LayerKind.INDEXER].layers == tuple(i for i, t in enumerate(types)
                                                      if t == "full")
    # HYV4ForCausalLM on the meta device: 58,278,193,133
    assert abs(s.params.total - 58_278_193_133) <= 100_000
    # llama.cpp's hy_v4: the K-only latent in all 34 layers, the indexer keys (in the -ctk
    # type) in the 10 "full" ones; vLLM and SGLang are not sized
    from kvcore import CacheOptions, InputError, find_gpu, get_format
    from kvcore.engines import EngineRequest, engine_plan
    q8 = get_format("q8_0")
    req = EngineRequest(spec=s, context=65536, sequences=1,
                        cache=CacheOptions(kv_k=q8, kv_v=q8), gpus=(find_gpu("h200"),))
    sizes = [line for line in engine_plan("llama.cpp", req).log_lines
             if line.startswith("llama_kv_cache: size")]
    mib = 65536 / 2**20
    assert [f"{34 * 612 * mib:.2f} MiB" in sizes[0], f"{10 * 136 * mib:.2f} MiB" in sizes[1]] \
        == [True, True]
    assert "34 layers" in sizes[0] and "10 layers" in sizes[1]
    with pytest.raises(InputError, match="Hy4's MLA"):
        engine_plan("trtllm", req)
    # SGLang 0.5.23's HYV4ForCausalLM is on its DSA list: the pool's cell is the latent (576
    # values in bf16) in all 34 layers and a 132-byte indexer key in the 10 "full" ones (the
    # shared layers' index buffers have 0 rows)
    f16 = get_format("f16")
    r = engine_plan("sglang", EngineRequest(spec=s, context=65536, sequences=1,
                                            cache=CacheOptions(kv_k=f16, kv_v=f16),
                                            gpus=(find_gpu("h200"),)))
    assert r.extra["cell_bytes"] == 34 * 1152 + 10 * 132
    assert r.kv_tokens == r.kv_pool_bytes // r.extra["cell_bytes"] // 64 * 64
    with pytest.raises(InputError, match="HYV4ForCausalLMNextN") as e:
        engine_plan("sglang", EngineRequest(spec=s, context=65536, sequences=1,
                                            cache=CacheOptions(kv_k=f16, kv_v=f16, mtp=True),
                                            gpus=(find_gpu("h200"),)))
    assert e.value.field == "mtp"
    # vLLM 0.34's models/hy_v4: the latent in all 34 layers (bf16 576 × 2 B, fp8_ds_mla 656),
    # DeepseekV32IndexerCache rows (128 fp8 values and a 4-byte scale) in the 10 "full" ones
    for kv, per_token in (("f16", 34 * 1152 + 10 * 132), ("fp8", 34 * 656 + 10 * 132)):
        fmt = get_format(kv)
        r = engine_plan("vllm", EngineRequest(spec=s, context=65536, sequences=1,
                                              cache=CacheOptions(kv_k=fmt, kv_v=fmt),
                                              gpus=(find_gpu("h200"),)))
        assert f"{per_token:,} bytes a token per rank" in " ".join(r.notes)
        assert any(n.startswith("Hy4 (models/hy_v4)") for n in r.notes)
    # its MTP draft's indexer caching was not read
    with pytest.raises(InputError, match="HYV4MTP") as e:
        engine_plan("vllm", EngineRequest(spec=s, context=65536, sequences=1,
                                          cache=CacheOptions(kv_k=q8, kv_v=q8, mtp=True),
                                          gpus=(find_gpu("h200"),)))
    assert e.value.field == "mtp"


def test_ax_k2_reads_as_mla_with_the_indexer_and_gated_queries_and_norms():
    # AXK2Config's defaults (its documented checkpoint, A.X-K2)
    n = 48
    cfg = {"model_type": "axk2", "vocab_size": 163840, "hidden_size": 2048,
           "intermediate_size": 5120, "moe_intermediate_size": 512, "num_hidden_layers": n,
           "num_attention_heads": 32, "num_key_value_heads": 32, "n_shared_experts": 1,
           "n_routed_experts": 128, "kv_lora_rank": 128, "q_lora_rank": 384,
           "qk_rope_head_dim": 32, "v_head_dim": 64, "qk_nope_head_dim": 64,
           "num_experts_per_tok": 8, "tie_word_embeddings": False,
           "mlp_layer_types": ["dense"] + ["sparse"] * (n - 1), "index_topk": 2048,
           "index_head_dim": 128, "index_n_heads": 16, "head_dim": 32,
           "layer_types": ["indexed_attention"] * n, "gated_norm_rank": 16}
    s = spec(cfg)
    groups = {g.kind: g for g in s.groups}
    assert groups[LayerKind.MLA].count == n and groups[LayerKind.MLA].head_dim_k == 128 + 32
    assert groups[LayerKind.INDEXER].count == n
    # AXK2ForCausalLM on the meta device: 20,314,494,976
    assert abs(s.params.total - 20_314_494_976) <= 100_000


def test_mistral_large_4_nope_layers_keep_a_latent_without_its_rotary_part():
    # MistralLarge4TextConfig's defaults (its documented checkpoint, Mistral-Large-4-1T-A52B)
    n = 72
    cfg = {"model_type": "mistral_large4_text", "vocab_size": 204800, "hidden_size": 6144,
           "intermediate_size": 24576, "moe_intermediate_size": 6144, "num_hidden_layers": n,
           "num_attention_heads": 64, "num_key_value_heads": 64, "n_shared_experts": 1,
           "n_routed_experts": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
           "v_head_dim": 128, "qk_nope_head_dim": 64, "num_experts_per_tok": 4,
           "tie_word_embeddings": False, "index_topk": 2048, "index_head_dim": 128,
           "index_n_heads": 32, "head_dim": 64, "first_k_dense_replace": 1,
           "mlp_layer_types": ["dense"] + ["sparse"] * (n - 1),
           "layer_types": ["indexed_attention"] * n,
           "no_rope_layers": [0 if (i + 1) % 4 == 0 else 1 for i in range(n)],
           "kv_source_layers": list(range(n))}
    s = spec(cfg)
    widths = sorted((g.count, g.head_dim_k) for g in s.groups if g.kind is LayerKind.MLA)
    assert widths == [(18, 512), (54, 512 + 64)]
    # its text model as transformers builds it: 1,051,822,421,536 with the vision tower and
    # projector (1,654,005,760 by kvplan's estimate of the tower)
    assert abs(s.params.total - (1_051_822_421_536 - 1_654_005_760)) <= 60_000_000
    with pytest.raises(ConfigError, match="kv_source_layers"):
        spec({**cfg, "kv_source_layers": [0, 0] + list(range(2, n))})


def test_a_pixtral_tower_is_gated_whatever_its_activation():
    cfg = real("devstral-small-2-24b-instruct")
    silu = spec(cfg).params.encoder
    gelu = copy.deepcopy(cfg)
    gelu["vision_config"]["hidden_act"] = "gelu"
    assert spec(gelu).params.encoder == silu
    # a tower of another kind with a GELU MLP has two matrices
    other = copy.deepcopy(gelu)
    other["vision_config"]["model_type"] = "siglip_vision_model"
    v = cfg["vision_config"]
    assert silu - spec(other).params.encoder == (v["num_hidden_layers"] * v["hidden_size"]
                                                 * v["intermediate_size"])


def test_jetmoe_counts_its_attention_experts_and_reads_the_routed_ones():
    # JetMoeConfig's defaults (transformers 5.25): 12 layers, 8 experts of which a token uses 2,
    # in attention and in the MLP alike; 16 KV heads × 128 shared by the attention experts
    cfg = {"model_type": "jetmoe", "vocab_size": 32000, "hidden_size": 2048,
           "num_hidden_layers": 12, "num_key_value_heads": 16, "kv_channels": 128,
           "intermediate_size": 5632, "num_local_experts": 8, "num_experts_per_tok": 2,
           "num_attention_heads": 32, "tie_word_embeddings": True,
           "activation_function": "silu"}
    s = spec(cfg)
    (full,) = s.groups
    assert (full.n_kv_heads, full.head_dim_k) == (16, 128)
    # transformers builds 4,293,888,000 parameters: 26,624 more, the MLPs' output biases
    # (hidden a layer) and the final norm
    assert s.params.total == 4_293_888_000 - 12 * 2048 - 2048
    # a token reads 2 of the 8 attention experts (each 2 × 2048 × 2048)
    routed = 12 * 8 * 2 * 2048 * 2048
    one = {**cfg, "num_experts_per_tok": 1}
    assert s.params.active - spec(one).params.active == routed // 8 + 12 * 8 * 3 * 2048 * 5632 // 8


def test_moshi_reads_ffn_dim_as_its_gated_pair_and_says_what_it_leaves_out():
    # MoshiConfig's defaults (transformers 5.25): its fc1 is hidden -> ffn_dim, split into the
    # gate and up halves, fc2 ffn_dim / 2 -> hidden
    cfg = {"model_type": "moshi", "vocab_size": 32000, "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
           "ffn_dim": 22528, "sliding_window": 3000, "max_position_embeddings": 3000,
           "depth_decoder_config": {"model_type": "moshi_depth"},
           "audio_encoder_config": {"model_type": "mimi"}}
    s = spec(cfg)
    mlp = 32 * 3 * 4096 * (22528 // 2)
    attention = 32 * 4 * 4096 * 4096
    norms = 32 * 2 * 4096
    assert s.params.total == mlp + attention + norms + 2 * 32000 * 4096
    # transformers' MoshiForCausalLM: 6,839,083,008 (its embedding's four padding rows and the
    # final norm more)
    assert abs(s.params.total - 6_839_083_008) < 10_000
    assert any("depth decoder" in n for n in s.notes)


def test_plamo3_slides_all_but_every_patternth_layer_over_window_size():
    # Plamo3Config (its remote code; vLLM plamo3.py reads the layer_types and per-layer
    # windows it derives): a full layer every sliding_window_pattern layers, window_size wide
    cfg = {"model_type": "plamo3", "architectures": ["Plamo3ForCausalLM"],
           "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 4, "head_dim": 128, "window_size": 2048,
           "sliding_window_pattern": 8, "intermediate_size": 13312, "vocab_size": 32000,
           "max_position_embeddings": 65536, "tie_word_embeddings": True}
    s = spec(cfg)
    groups = {g.kind: g for g in s.groups}
    assert groups[LayerKind.FULL].layers == (7, 15, 23, 31)
    assert groups[LayerKind.SLIDING].count == 28 and groups[LayerKind.SLIDING].window == 2048
    # the same config as its class saves it: layer_types and the per-layer window list
    saved = {**cfg, "layer_types": ["full_attention" if (i + 1) % 8 == 0
                                    else "sliding_attention" for i in range(32)],
             "interleaved_sliding_window": [None if (i + 1) % 8 == 0 else 2048
                                            for i in range(32)]}
    assert spec(saved).groups == s.groups


@pytest.mark.parametrize(("field", "value"), [
    ("sliding_window_layers", [0, 2, 4]), ("num_swa_key_value_heads", 2),
    ("swa_num_key_value_heads", 2), ("global_head_dim", 256)])
def test_per_kind_geometry_kvplan_does_not_read_for_the_model_is_refused(field, value):
    # Baichuan-M1's sliding layers (their own heads) and other architectures' per-kind fields:
    # sized with the top-level heads every layer would be wrong
    cfg = {"model_type": "baichuan_m1", "num_hidden_layers": 6, "hidden_size": 256,
           "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 1000,
           "intermediate_size": 512, "sliding_window": 128, field: value}
    with pytest.raises(ConfigError, match="geometry of their own") as e:
        spec(cfg)
    assert e.value.field == field and "baichuan_m1" in str(e.value)


def test_a_bad_value_is_named_as_the_config_spells_the_field():
    cfg = real("longcat-flash-chat")
    with pytest.raises(ConfigError) as e:
        spec({**cfg, "moe_topk": 0})
    assert e.value.field == "moe_topk" and "'moe_topk'" in str(e.value)
    gpt2 = {"model_type": "gpt2", "n_layer": 0, "n_embd": 64, "n_head": 4, "vocab_size": 100}
    with pytest.raises(ConfigError) as e:
        spec(gpt2)
    assert e.value.field == "n_layer"


def test_kimi_k31_indexer_is_refused_not_left_out():
    # Kimi-K3.1 is K3 with an indexer cache on its dsa_layers: sizing it as K3 would leave
    # that cache out
    base = json.loads((Path(__file__).resolve().parent.parent / "kvcore" / "data" / "models"
                       / "kimi-k3.json").read_text())
    cfg = copy.deepcopy(base.get("config", base))
    cfg["model_type"] = "kimi_k31"
    cfg["text_config"]["dsa_config"] = {"dsa_layers": [4, 8], "index_head_dim": 64,
                                        "index_num_heads": 16, "index_topk": 2048}
    with pytest.raises(ConfigError, match="dsa_config") as e:
        spec(cfg)
    assert e.value.field == "dsa_config" and "does not size" in str(e.value)
    spec(base.get("config", base))


def test_lfm3_layer_pattern_and_window_default_as_its_config_class():
    # Lfm3Config without layer_types: full attention at layer i % 4 == 2, sliding at
    # i % 4 == 0 past layer 0 (window 256), the gated short convolution (7 taps) elsewhere
    cfg = {"architectures": ["Lfm3ForCausalLM"], "model_type": "lfm3", "vocab_size": 128000,
           "hidden_size": 2048, "intermediate_size": 7680, "num_hidden_layers": 24,
           "num_attention_heads": 16, "num_key_value_heads": 4,
           "max_position_embeddings": 128000}
    s = spec(cfg)
    kinds = {g.kind: g for g in s.groups}
    assert kinds[LayerKind.FULL].layers == tuple(range(2, 24, 4))
    assert kinds[LayerKind.SLIDING].layers == tuple(range(4, 24, 4))
    assert kinds[LayerKind.SLIDING].window == 256
    assert kinds[LayerKind.CONV].layers == tuple(i for i in range(24) if i % 4 in (1, 3)
                                                 or i == 0)
    assert kinds[LayerKind.CONV].state_values == 6 * 2048
    # a config that lists its own layer types keeps them
    own = spec({**cfg, "layer_types": ["full_attention"] * 24})
    assert [g.kind for g in own.groups] == [LayerKind.FULL]


def test_lfm3_counts_its_attention_gates_and_sandwich_norms():
    # Lfm3Attention's gate_proj (hidden -> one gate a head) in the 11 attention layers (6 full,
    # 5 sliding) and Lfm3DecoderLayer's two extra norms in all 24 (use_attention_gate and
    # use_sandwich_norm default true in Lfm3Config); q/k norms (head_dim each) either way
    cfg = {"architectures": ["Lfm3ForCausalLM"], "model_type": "lfm3", "vocab_size": 128000,
           "hidden_size": 2048, "intermediate_size": 7680, "num_hidden_layers": 24,
           "num_attention_heads": 16, "num_key_value_heads": 4,
           "max_position_embeddings": 128000}
    full = spec(cfg).params.total
    plain = spec({**cfg, "use_attention_gate": False, "use_sandwich_norm": False}).params.total
    assert full - plain == 11 * 2048 * 16 + 24 * 2 * 2048
    gateless = spec({**cfg, "use_attention_gate": False}).params.total
    assert full - gateless == 11 * 2048 * 16


@pytest.mark.parametrize(("engine", "needle"), [
    ("sglang", "no SGLang model of its own"), ("llama.cpp", "no lfm3 architecture"),
    ("trtllm", "Lfm3ForCausalLM")])
def test_lfm3_is_planned_by_vllm_alone(engine, needle):
    from kvcore import find_gpu, get_format
    from kvcore.engines import EngineRequest, engine_plan

    cfg = {"architectures": ["Lfm3ForCausalLM"], "model_type": "lfm3", "vocab_size": 128000,
           "hidden_size": 2048, "intermediate_size": 7680, "num_hidden_layers": 24,
           "num_attention_heads": 16, "num_key_value_heads": 4,
           "max_position_embeddings": 128000}
    f16 = get_format("f16")
    req = EngineRequest(spec=spec(cfg), context=8192, sequences=1,
                        cache=CacheOptions(kv_k=f16, kv_v=f16), gpus=(find_gpu("4090"),))
    with pytest.raises(InputError, match=needle) as e:
        engine_plan(engine, req)
    assert e.value.field == "engine" and "\n" not in str(e.value)
    assert engine_plan("vllm", req).fits
