"""RWKV-7: a recurrent state a layer (a head_dim × head_dim matrix a head and two token
shifts), no KV cache; llama.cpp serves it."""

import json

import pytest

from app.cli import main
from kvcore import CacheOptions, ConfigError, InputError, cache_size, find_gpu, get_format
from kvcore.engines import EngineRequest, engine_plan
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind

# RWKV-7 2.9B (world vocabulary): fla's RWKV7Config fields
CONFIG = {"architectures": ["RWKV7ForCausalLM"], "model_type": "rwkv7", "hidden_size": 2560,
          "num_hidden_layers": 32, "head_dim": 64, "intermediate_size": 8960,
          "vocab_size": 65536, "hidden_act": "sqrelu", "norm_eps": 1e-5,
          "decay_low_rank_dim": 96, "a_low_rank_dim": 96, "v_low_rank_dim": 64,
          "gate_low_rank_dim": 320, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def spec(cfg=CONFIG):
    return spec_from_config(cfg, name="rwkv7", source="test")


def test_every_layer_keeps_a_wkv_matrix_a_head_and_two_token_shifts():
    s = spec()
    (g,) = s.groups
    assert g.kind is LayerKind.LINEAR and g.layers == tuple(range(32))
    assert g.state_values == 40 * 64 * 64 + 2 * 2560
    assert g.conv_state_values == 2 * 2560
    f16 = get_format("f16")
    size = cache_size(s, 100_000, 3, CacheOptions(kv_k=f16, kv_v=f16))
    assert size.kv_bytes == 0
    assert size.state_bytes == 3 * 32 * (40 * 64 * 64 + 5120) * 4  # f32


def test_parameters_are_fla_s_count():
    # fla 0.6.0's RWKV7ForCausalLM built on the meta device from this config
    assert spec().params.total == 2_738_019_840


def test_defaults_fill_what_the_config_leaves_out():
    bare = {k: v for k, v in CONFIG.items() if k not in ("head_dim", "intermediate_size")}
    s = spec(bare)
    # head_dim 64; hidden_ratio 4 rounded to a multiple of 32
    assert s.groups[0].state_values == 40 * 64 * 64 + 5120
    assert "head_dim" in s.defaulted
    with_heads = spec({**bare, "num_heads": 20})
    assert with_heads.groups[0].state_values == 20 * 128 * 128 + 5120
    ffn = 4 * 2560 - 8960
    assert s.params.total - spec().params.total == 32 * 2 * 2560 * ffn
    with pytest.raises(ConfigError) as e:
        spec({**CONFIG, "value_dim": [2560] * 3})
    assert e.value.field == "value_dim"


def test_llama_cpp_keeps_the_state_in_recurrent_memory_alone(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    code = main([str(path), "--engine", "llama.cpp", "--gpu", "4090", "--ctx", "32k", "--seqs",
                 "4", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)["engine_report"]
    lines = "\n".join(report["log_lines"])
    assert "llama_kv_cache:" not in lines
    # R: 2 × 2560 f32 a layer and cell; S: 2560 × 64 f32
    assert ("llama_memory_recurrent: size =   82.50 MiB (     4 cells,  32 layers,  4 seqs  "
            "0 rs_seq), R (f32):    2.50 MiB, S (f32):   80.00 MiB") in lines


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_engines_without_an_rwkv_model_refuse_it(engine):
    f16 = get_format("f16")
    req = EngineRequest(spec=spec(), context=4096, sequences=1,
                        cache=CacheOptions(kv_k=f16, kv_v=f16), gpus=(find_gpu("h100"),))
    with pytest.raises(InputError, match="RWKV7ForCausalLM") as e:
        engine_plan(engine, req)
    assert e.value.field == "engine"
