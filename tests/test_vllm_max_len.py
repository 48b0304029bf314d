"""The max_model_len vLLM derives from a config, and a plan past it."""

import pytest

import kvcore
from app.common import make_query
from kvcore.command import read_command, resolve
from kvcore.hf import vllm_max_len
from kvcore.query import answer


@pytest.mark.parametrize(("config", "model_type", "length"), [
    ({"max_position_embeddings": 40960}, "qwen3", 40960),
    # the least of the keys present; model_max_length over them where set
    ({"max_position_embeddings": 8192, "seq_length": 4096}, "x", 4096),
    ({"max_position_embeddings": 8192, "model_max_length": 131072}, "cohere", 131072),
    # a linear or dynamic RoPE factor scales it; llama3, yarn and longrope are taken as scaled
    ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}},
     "llama", 16384),
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 2}},
     "llama", 8192),
    ({"max_position_embeddings": 131072,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "llama", 131072),
    ({"max_position_embeddings": 163840,
      "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}},
     "deepseek_v3", 163840),
    ({"max_position_embeddings": 131072, "rope_scaling": {"type": "su", "factor": 32}},
     "phi3", 131072),
    # newer transformers' rope_parameters, per layer type; Gemma 3 is never scaled
    ({"max_position_embeddings": 8192, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0},
        "sliding_attention": {"rope_type": "default"}}}, "x", 65536),
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
     "gemma3_text", 131072),
    ({}, "x", None),
])
def test_the_length_vllm_derives(config, model_type, length):
    assert vllm_max_len(config, model_type) == length


def test_the_catalogs_configs_give_their_trained_length():
    assert kvcore.load_model("qwen3-8b").vllm_max_len == 40960
    assert kvcore.load_model("llama-3.1-8b").vllm_max_len == 131072
    # Gemma 3's text config leaves the length to its class default
    assert kvcore.load_model("gemma-3-27b-it").vllm_max_len == 131072


def test_a_vllm_plan_past_the_derived_length_says_vllm_refuses_it_and_sets_the_variable():
    spec = kvcore.load_model("qwen3-8b")
    long = answer(make_query(spec, engine="vllm", gpu="h100", context="64k"))["engine_report"]
    assert long["command"].startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3-8B "
                                      "--max-model-len 65536")
    assert any("above the 40,960 it derives from the config" in n for n in long["notes"])
    within = answer(make_query(spec, engine="vllm", gpu="h100", context="40k"))["engine_report"]
    assert within["command"].startswith("vllm serve")
    assert not any("derives from the config" in n for n in within["notes"])
    # the printed command reads back to the same plan
    _, fields = resolve(read_command(long["command"]), "qwen3-8b")
    assert fields["context"] == 65536


@pytest.mark.parametrize(("config", "model_type", "length"), [
    ({"max_position_embeddings": 40960}, "qwen3", 40960),
    # the first key present, not the least
    ({"seq_length": 8192, "max_position_embeddings": 4096}, "x", 8192),
    # a linear or dynamic factor scales it; llama3, yarn, longrope and a scaling that names
    # original_max_position_embeddings do not; nor Gemma 3's, nor per-layer parameters
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 2}},
     "llama", 8192),
    ({"max_position_embeddings": 32768, "rope_scaling": {"type": "yarn", "factor": 4}},
     "qwen2", 32768),
    ({"max_position_embeddings": 4096, "rope_scaling": {
        "type": "dynamic", "factor": 2, "original_max_position_embeddings": 4096}}, "x", 4096),
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "linear", "factor": 8}},
     "gemma3_text", 131072),
    ({"max_position_embeddings": 8192, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0}}}, "x", 8192),
    ({}, "x", None),
])
def test_the_length_sglang_derives(config, model_type, length):
    from kvcore.hf import sglang_context_len

    assert sglang_context_len(config, model_type) == length


def test_an_sglang_plan_past_the_derived_length_sets_its_variable():
    spec = kvcore.load_model("gemma-3-27b-it")
    report = answer(make_query(spec, engine="sglang", gpu="h200",
                               context="256k"))["engine_report"]
    assert report["command"].startswith("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 python -m "
                                        "sglang.launch_server")
    assert any("above the 131,072 it derives from the config" in n for n in report["notes"])
    _, fields = resolve(read_command(report["command"]), "gemma-3-27b-it")
    assert fields["context"] == 262144


@pytest.mark.parametrize(("text", "tokens"), [("131072", 131072), ("128k", 128000),
                                              ("128Ki", 131072), ("1Mi", 1 << 20)])
def test_sglang_context_length_suffixes(text, tokens):
    launch = read_command(f"python -m sglang.launch_server --model-path x --context-length {text}")
    assert launch.settings["context"] == tokens


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), True, 1e308])
def test_engine_lengths_ignore_what_is_no_finite_number(bad):
    """A length or RoPE factor that is NaN, infinite or a boolean is no length: vLLM's and
    SGLang's derived lengths pass over it (or give none), never a traceback."""
    from kvcore.hf import sglang_context_len

    base = {"max_position_embeddings": 4096}
    assert vllm_max_len({**base, "model_max_length": bad}, "llama") in (
        (4096,) if bad != 1e308 else (int(1e308),))
    assert vllm_max_len({"model_max_length": bad, "seq_length": 2048}, "x") in (
        (2048,) if bad != 1e308 else (int(1e308),))
    rope = {**base, "rope_scaling": {"type": "linear", "factor": bad}}
    assert vllm_max_len(rope, "llama") in ((4096,) if bad != 1e308 else (None,))
    assert sglang_context_len(rope, "llama") in ((4096,) if bad != 1e308 else (None,))
    assert sglang_context_len({"max_position_embeddings": bad, "seq_length": 2048}) == 2048
