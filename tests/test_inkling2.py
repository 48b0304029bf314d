"""Inkling-2: sliding and full layers of their own geometries, K and V convolved before
attention and the residual stream convolved after attention and after the MLP, each
convolution keeping its last inputs a sequence; routed experts. The config is
Inkling2TextConfig's defaults (its documented checkpoint, Inkling-2-Small)."""

import pytest
from rawonly import ENGINES, refusal_and_raw

from kvcore import CacheOptions, ConfigError, cache_size, get_format
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind

FULL = tuple(range(5, 48, 6))
CONFIG = {"model_type": "inkling2_text", "vocab_size": 201024, "unpadded_vocab_size": 200058,
          "hidden_size": 4608, "num_hidden_layers": 48, "num_attention_heads": 48,
          "num_key_value_heads": 8, "head_dim": 128, "swa_num_attention_heads": 48,
          "swa_num_key_value_heads": 8, "swa_head_dim": 128, "sliding_window_size": 1024,
          "d_rel": 16, "rel_extent": 1024, "max_position_embeddings": 1048576,
          "layer_types": ["hybrid" if i in FULL else "hybrid_sliding" for i in range(48)],
          "conv_kernel_size": 4, "moe_intermediate_size": 2304, "n_routed_experts": 384,
          "num_experts_per_tok": 8, "torch_dtype": "bfloat16"}


def spec(**over):
    return spec_from_config({**CONFIG, **over}, name="inkling2", source="test")


def test_layers_keep_kv_of_their_kind_and_their_convolutions_last_inputs():
    s = spec()
    by_kind = {g.kind: g for g in s.groups}
    full, sliding, conv = (by_kind[k] for k in (LayerKind.FULL, LayerKind.SLIDING,
                                                 LayerKind.CONV))
    assert full.layers == FULL and (full.n_kv_heads, full.head_dim_k) == (8, 128)
    assert sliding.count == 40 and sliding.window == 1024
    # kernel 4: 3 inputs of K (8 × 128), V, and twice the residual stream (4608)
    assert conv.count == 48 and conv.state_values == 3 * (2 * 1024 + 2 * 4608)
    f16 = get_format("f16")
    size = cache_size(s, 32768, 1, CacheOptions(kv_k=f16, kv_v=f16))
    assert size.kv_bytes == (8 * 32768 + 40 * 1024) * 2 * 1024 * 2


def test_sliding_layers_of_fewer_kv_heads_convolve_fewer_channels():
    s = spec(swa_num_key_value_heads=4)
    states = sorted((g.count, g.state_values) for g in s.groups if g.kind is LayerKind.CONV)
    assert states == [(8, 3 * (2 * 1024 + 2 * 4608)), (40, 3 * (2 * 512 + 2 * 4608))]


def test_parameters_match_transformers_model():
    # Inkling2ForCausalLM with these defaults on the meta device: 593,718,478,848 (kvplan
    # counts its usual norms, not the attention residuals' queries)
    assert abs(spec().params.total - 593_718_478_848) <= 1_000_000
    with pytest.raises(ConfigError) as e:
        spec(layer_types=["hybrid", "full_attention"] * 24)
    assert e.value.field == "layer_types"


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_are_refused_and_raw_sizes_it(engine):
    error, raw = refusal_and_raw(spec(), engine, "h200")
    assert "Inkling-2's short-convolution state" in str(error) and error.field == "engine"
    assert raw.weights_bytes > 1e12


def test_without_layer_types_every_sixth_layer_is_full():
    bare = {k: v for k, v in CONFIG.items() if k != "layer_types"}
    s = spec_from_config(bare, name="inkling2", source="test")
    assert s.groups == spec().groups
