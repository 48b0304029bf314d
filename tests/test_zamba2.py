"""Zamba2: Mamba-2 layers throughout, and shared attention blocks applied at its hybrid layers,
each application with its own K/V."""

import pytest

from kvcore import CacheOptions, ConfigError, InputError, find_gpu, get_format, load_model
from kvcore.engines import EngineRequest, EngineSettings, engine_plan
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind
from kvcore.parallel import Parallel
from kvcore.weights import weights_for

HYBRID_7B = (6, 11, 17, 23, 29, 35, 41, 47, 53, 59, 65, 71, 77)


def zamba2_7b(**over):
    """Zamba2-7B's published geometry (Zyphra/Zamba2-7B-instruct)."""
    cfg = {
        "architectures": ["Zamba2ForCausalLM"], "model_type": "zamba2",
        "hidden_size": 3584, "num_hidden_layers": 81,
        "layers_block_type": ["hybrid" if i in HYBRID_7B else "mamba" for i in range(81)],
        "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 2,
        "n_mamba_heads": 112, "mamba_headdim": 64, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 32, "attention_head_dim": 224,
        "num_mem_blocks": 2, "use_shared_mlp_adapter": True,
        "use_shared_attention_adapter": False, "adapter_rank": 128, "vocab_size": 32000,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
    }
    cfg.update(over)
    return cfg


def spec(cfg):
    return spec_from_config(cfg, name="zamba2", source="test")


def test_hybrid_layers_hold_kv_of_the_double_width_attention_and_every_layer_a_mamba_state():
    s = spec(zamba2_7b())
    groups = {g.kind: g for g in s.groups}
    assert set(groups) == {LayerKind.FULL, LayerKind.MAMBA}
    full, mamba = groups[LayerKind.FULL], groups[LayerKind.MAMBA]
    assert full.layers == HYBRID_7B
    # attention over hidden state and input embeddings: 2 × 3584 over 32 heads
    assert (full.n_kv_heads, full.head_dim_k, full.head_dim_v) == (32, 224, 224)
    assert mamba.layers == tuple(range(81))
    # ssm 112 heads × 64 × 64; conv 3 × (7168 inner + 2 groups × 2 × 64)
    assert mamba.state_values == 112 * 64 * 64 + 3 * (7168 + 2 * 2 * 64)
    assert mamba.conv_state_values == 3 * 7424
    assert s.decoder_layers == 81 and s.num_layers == 81


def test_weights_count_the_shared_blocks_once_and_a_decode_step_reads_them_at_each_use():
    s = spec(zamba2_7b())
    h, inter, rank, vocab = 3584, 14336, 128, 32000
    mixer = (h * (2 * 7168 + 2 * 2 * 64 + 112)  # in_proj
             + 7424 * 4 + 7424                  # depthwise conv and its bias
             + 3 * 112 + 7168                   # dt_bias, A_log, D; gated norm
             + 7168 * h                         # out_proj
             + h)                               # the layer's norm
    attention = 3 * (2 * h) * (2 * h) + (2 * h) * h
    block = attention + 3 * h * inter + 2 * h + h
    per_hybrid = h * h + h * rank + rank * 2 * inter  # linear, MLP adapter
    total = 81 * mixer + 13 * per_hybrid + 2 * block + vocab * h + h
    assert s.params.total == total
    # 7.36B: the published "7.4B"
    assert round(total / 1e9, 2) == 7.36
    # tied head; each of 13 hybrid layers reads a shared block: 11 reads beyond the 2 stored
    assert s.params.active - s.params.total == 11 * block
    assert s.params.embedding == vocab * h


def test_attention_adapters_and_an_untied_head_are_counted_where_the_config_asks():
    base = spec(zamba2_7b())
    more = spec(zamba2_7b(use_shared_attention_adapter=True, tie_word_embeddings=False))
    h, rank = 3584, 128
    assert more.params.total - base.params.total == (13 * 3 * (2 * h * rank + rank * 2 * h)
                                                     + 32000 * h)


def test_transformers_5_block_names_and_hybrid_ids_read_the_same():
    base = spec(zamba2_7b())
    resaved = zamba2_7b(layers_block_type=["hybrid" if i in HYBRID_7B else "linear_attention"
                                           for i in range(81)])
    ids_only = zamba2_7b(hybrid_layer_ids=list(HYBRID_7B))
    del ids_only["layers_block_type"]
    for cfg in (resaved, ids_only):
        other = spec(cfg)
        assert other.groups == base.groups and other.params == base.params
    # without mamba_headdim the head width is the inner width over the heads
    no_headdim = zamba2_7b()
    del no_headdim["mamba_headdim"]
    assert spec(no_headdim).groups == base.groups


@pytest.mark.parametrize(("over", "field"), [
    ({"layers_block_type": ["mamba"] * 80}, "layers_block_type"),
    ({"layers_block_type": ["mamba"] * 80 + ["attention"]}, "layers_block_type"),
    ({"layers_block_type": None}, "layers_block_type"),
    ({"layers_block_type": None, "hybrid_layer_ids": [3, 81]}, "layers_block_type"),
    ({"attention_head_dim": None, "num_attention_heads": 5, "num_key_value_heads": 5},
     "attention_head_dim"),
    ({"num_key_value_heads": 8}, "num_key_value_heads"),
])
def test_bad_zamba2_fields_are_one_line_errors(over, field):
    with pytest.raises(ConfigError) as e:
        spec(zamba2_7b(**over))
    assert e.value.field == field and "\n" not in str(e.value)


def request(s, *, tp=1, pp=1, lora=None, gpu="h100"):
    settings = EngineSettings() if lora is None else EngineSettings(lora=lora)
    return EngineRequest(spec=s, context=4096, sequences=1,
                         cache=CacheOptions(kv_k=get_format("f16"), kv_v=get_format("f16")),
                         gpus=(find_gpu(gpu),), parallel=Parallel(tp=tp, pp=pp),
                         settings=settings)


@pytest.mark.parametrize(("engine", "needle"), [
    ("sglang", "no SGLang model implements Zamba2"),
    ("llama.cpp", "llama.cpp has no Zamba2 architecture"),
    ("trtllm", "no Zamba2ForCausalLM model"),
])
def test_engines_without_a_zamba2_model_refuse_it(engine, needle):
    with pytest.raises(InputError, match=needle) as e:
        engine_plan(engine, request(spec(zamba2_7b())))
    assert e.value.field == "engine"


def test_vllm_plans_zamba2_under_tensor_parallelism_and_refuses_pp_and_lora():
    s = spec(zamba2_7b())
    one = engine_plan("vllm", request(s))
    two = engine_plan("vllm", request(s, tp=2))
    assert two.kv_pool_bytes > one.kv_pool_bytes
    with pytest.raises(InputError, match="pipeline parallelism") as e:
        engine_plan("vllm", request(s, pp=2))
    assert e.value.field == "pp"
    # 2 B/C groups split over 4 ranks: vLLM's Mamba-2 mixer refuses it
    with pytest.raises(InputError):
        engine_plan("vllm", request(s, tp=4))


def test_a_llama_quantize_mix_is_priced_at_its_average_with_the_blocks_read_per_use():
    s = spec(zamba2_7b())
    w = weights_for(s, "q4_k_m")
    assert w.active_bytes > w.bytes
    bf16 = weights_for(s, "bf16")
    assert bf16.active_bytes - bf16.bytes == pytest.approx(
        2 * (s.params.active - s.params.total), abs=2)


def test_the_catalog_loader_reads_a_zamba2_config_file(tmp_path):
    import json
    path = tmp_path / "config.json"
    path.write_text(json.dumps(zamba2_7b()))
    s = load_model(str(path))
    assert s.model_type == "zamba2" and s.params.total == spec(zamba2_7b()).params.total
