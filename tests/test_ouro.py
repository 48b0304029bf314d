"""Ouro: a looped language model whose layers run total_ut_steps times a token, each run with
a KV cache of its own (vLLM's OuroAttention builds an Attention a run)."""

import pytest

from kvcore import CacheOptions, InputError, find_gpu, get_format
from kvcore.engines import EngineRequest, engine_plan
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind
from kvcore.parallel import Parallel

#: Ouro-1.4B's geometry (ByteDance/Ouro-1.4B)
OURO = {"architectures": ["OuroForCausalLM"], "model_type": "ouro", "hidden_size": 2048,
        "intermediate_size": 5632, "num_hidden_layers": 24, "num_attention_heads": 16,
        "num_key_value_heads": 16, "vocab_size": 49152, "max_position_embeddings": 65536,
        "total_ut_steps": 4, "hidden_act": "silu", "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"}
H, L = 2048, 24


def spec(**over):
    cfg = {k: v for k, v in {**OURO, **over}.items() if v is not None}
    return spec_from_config(cfg, name="ouro", source="test")


def test_each_run_of_the_loop_caches_its_own_k_and_v():
    s = spec()
    (full,) = s.groups
    assert full.kind is LayerKind.FULL and (full.n_kv_heads, full.head_dim_k) == (16, 128)
    # 4 runs of 24 layers: every layer's number four times
    assert full.layers == tuple(i for i in range(L) for _ in range(4)) and full.count == 96
    assert s.decoder_layers == L
    # vLLM's default where the config leaves total_ut_steps out
    assert spec(total_ut_steps=None).groups == s.groups
    assert spec(total_ut_steps=2).groups[0].count == 48


def test_weights_are_stored_once_and_read_every_run():
    p = spec().params
    layer = 4 * H * H + 3 * H * 5632 + 4 * H
    gate = H + 1
    assert p.total == L * layer + 2 * 49152 * H + gate
    # the published 1.4B
    assert round(p.total / 1e9, 1) == 1.4
    # a token reads the layers four times, the head once
    assert p.active == 4 * L * layer + 49152 * H + gate


def request(s, *, pp=1, gpu="4090"):
    f16 = get_format("f16")
    return EngineRequest(spec=s, context=8192, sequences=1,
                         cache=CacheOptions(kv_k=f16, kv_v=f16), gpus=(find_gpu(gpu),),
                         parallel=Parallel(pp=pp))


def test_vllm_removed_its_ouro_model():
    # registry.py _PREVIOUSLY_SUPPORTED_MODELS: "OuroForCausalLM": "0.26.0"
    with pytest.raises(InputError, match="does not run OuroForCausalLM: removed after vLLM "
                                         "0.26.0") as e:
        engine_plan("vllm", request(spec()))
    assert e.value.field == "engine" and "\n" not in str(e.value)


@pytest.mark.parametrize(("engine", "needle"), [
    ("sglang", "no SGLang model implements Ouro"),
    ("llama.cpp", "how llama.cpp places Ouro's unrolled layers"),
    ("trtllm", "no OuroForCausalLM model"),
])
def test_engines_without_a_modelled_ouro_layout_refuse_it(engine, needle):
    with pytest.raises(InputError, match=needle) as e:
        engine_plan(engine, request(spec()))
    assert e.value.field == "engine"
