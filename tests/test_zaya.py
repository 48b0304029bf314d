"""ZAYA (Zyphra's ZAYA1): Compressed Convolutional Attention, each layer a KV cache beside a
small state (its q/k convolution's last inputs and the previous token's delayed V), and
routed experts with an MLP router. The config is ZayaConfig's defaults, its documented
checkpoint Zyphra/ZAYA1-8B."""

import pytest
from rawonly import ENGINES, refusal_and_raw

from kvcore import CacheOptions, ConfigError, cache_size, get_format
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind

CONFIG = {"architectures": ["ZayaForCausalLM"], "model_type": "zaya", "vocab_size": 262272,
          "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 8,
          "num_key_value_heads": 2, "head_dim": 128, "max_position_embeddings": 131072,
          "tie_word_embeddings": True, "moe_intermediate_size": 2048, "num_experts_per_tok": 1,
          "num_experts": 16, "layer_types": ["hybrid"] * 40, "router_hidden_size": 256,
          "cca_time0": 2, "cca_time1": 2, "torch_dtype": "bfloat16"}


def spec(**over):
    return spec_from_config({**CONFIG, **over}, name="zaya", source="test")


def test_each_layer_keeps_kv_and_its_cca_state():
    s = spec()
    full = next(g for g in s.groups if g.kind is LayerKind.FULL)
    conv = next(g for g in s.groups if g.kind is LayerKind.CONV)
    assert full.layers == conv.layers == tuple(range(40))
    assert (full.n_kv_heads, full.head_dim_k, full.head_dim_v) == (2, 128, 128)
    # (2 − 1) + (2 − 1) inputs of the q and k channels, (8 + 2) × 128; half a V of 2 × 128
    assert conv.state_values == 2 * 1280 + 128
    f16 = get_format("f16")
    one = cache_size(s, 4096, 1, CacheOptions(kv_k=f16, kv_v=f16))
    assert one.kv_bytes == 40 * 2 * 2 * 128 * 2 * 4096
    assert one.state_bytes == 40 * (2 * 1280 + 128) * 4  # in f32


def test_parameters_match_transformers_model():
    # ZayaForCausalLM with these defaults on the meta device: 8,840,488,784 (kvplan leaves
    # out the q/k norms' temperatures and counts its usual norms)
    p = spec().params
    assert abs(p.total - 8_840_488_784) <= 2_500
    # one expert of 16 a token
    assert p.active < p.total / 5


def test_sliding_layers_keep_their_window():
    types = ["hybrid_sliding", "hybrid_sliding", "hybrid_sliding", "hybrid"] * 10
    s = spec(layer_types=types, sliding_window=4096)
    sliding = next(g for g in s.groups if g.kind is LayerKind.SLIDING)
    assert sliding.window == 4096 and sliding.count == 30
    with pytest.raises(ConfigError) as e:
        spec(layer_types=["hybrid", "attention"] * 20)
    assert e.value.field == "layer_types"


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_are_refused_and_raw_sizes_it(engine):
    error, raw = refusal_and_raw(spec(), engine, "4090")
    assert "Compressed Convolutional Attention" in str(error) and error.field == "engine"
    assert raw.fits
