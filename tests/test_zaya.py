"""ZAYA (Zyphra's ZAYA1): Compressed Convolutional Attention, each layer a KV cache beside a
small state (its q/k convolution's last inputs and the previous token's delayed V), and
routed experts with an MLP router. The config is ZayaConfig's defaults, its documented
checkpoint Zyphra/ZAYA1-8B."""

import pytest
from rawonly import ENGINES, refusal_and_raw

from kvcore import CacheOptions, ConfigError, InputError, cache_size, find_gpu, get_format
from kvcore.engines import EngineRequest, EngineSettings, engine_plan
from kvcore.engines.lora import LoRA
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind
from kvcore.parallel import Parallel

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


@pytest.mark.parametrize("engine", [e for e in ENGINES if e != "vllm"])
def test_engines_are_refused_and_raw_sizes_it(engine):
    error, raw = refusal_and_raw(spec(), engine, "4090")
    assert "Compressed Convolutional Attention" in str(error) and error.field == "engine"
    assert raw.fits
    # SGLang's own ZAYA model is ZAYA1-base's alternating layout (models/zaya.py _layer_class)
    assert ("ZAYA1-base layout" in str(error)) == (engine == "sglang")


def vllm_plan(tp=1, **settings):
    bf16 = get_format("bf16")
    return engine_plan("vllm", EngineRequest(
        spec=spec(), context=32768, sequences=1, cache=CacheOptions(kv_k=bf16, kv_v=bf16),
        gpus=(find_gpu("h100"),), parallel=Parallel(tp=tp), settings=EngineSettings(**settings)))


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_vllm_keeps_every_kv_head_and_the_cca_state_on_each_rank(tp):
    # vLLM 0.34.0 models/zaya.py: ReplicatedLinear attention and CCA projections, the CCA
    # state is_kv_cache_tp_replicated: a 64-token page of 2 KV heads × (128 + 128) × 2 B on
    # every rank whatever tp, and a SHORT_CONV state of 2,688 values in bf16 (5,376 B) that
    # the page holds; 40 attention and 40 state layers: groups of 40
    r = vllm_plan(tp)
    assert r.block_tokens == 64 and r.extra["page_bytes"] == 64 * 2 * 256 * 2
    assert r.extra["groups"] == ["full", "conv"] and r.extra["group_size"] == 40
    # a 32K request: 512 attention blocks and align mode's 2 state pages
    assert r.max_concurrency == r.blocks / (512 + 2)
    # the experts (8,053,063,680 parameters) and the tied embedding split over the ranks,
    # the rest of the decoder whole on each
    p = spec().params
    embed = 262272 * 2048
    whole = p.total - p.experts - embed
    assert r.weights_bytes == 2 * (whole + (p.experts + embed) // tp)


@pytest.mark.parametrize(("settings", "field"), [
    ({"enable": "pp"}, "pp"), ({"speculative_tokens": 2}, "speculative_tokens"),
    ({"lora": LoRA(1, 16)}, "enable_lora")])
def test_vllm_refuses_what_zaya_s_class_does_not_implement(settings, field):
    with pytest.raises(InputError) as e:
        if "enable" in settings:
            bf16 = get_format("bf16")
            engine_plan("vllm", EngineRequest(
                spec=spec(), context=32768, sequences=1,
                cache=CacheOptions(kv_k=bf16, kv_v=bf16), gpus=(find_gpu("h100"),) * 2,
                parallel=Parallel(pp=2)))
        else:
            vllm_plan(**settings)
    assert e.value.field == field and "ZayaForCausalLM" in str(e.value)
