"""vLLM 0.34.0's TurboQuant and integer per-token-head KV caches: slots, boundary layers,
the block alignment and refusals, worked by hand (kvcore/engines/vllm_tq.py)."""

import pytest

from kvcore import CacheOptions, InputError, find_gpu, load_model, spec_from_config
from kvcore.command import read_command
from kvcore.engines import EngineRequest, EngineSettings, engine_plan
from kvcore.formats import get_format

GiB = 1024**3


def plan(model, kv, budget=10 * GiB, spec=None, **settings):
    return engine_plan("vllm", EngineRequest(
        spec=spec or load_model(model), context=8192, sequences=1,
        cache=CacheOptions(kv_k=kv, kv_v=kv), kv_budget_bytes=budget,
        settings=EngineSettings(**settings)))


@pytest.mark.parametrize(("name", "k", "v"), [
    # a 128-wide head: fp8 keys 128 B, or Lloyd-Max indices (64 / 48 B) + a 2-byte norm;
    # values 64 / 48 B + a 2-byte scale and a 2-byte zero
    ("tq_k8v4", 128, 68), ("tq_4bit", 66, 68), ("tq_k3v4", 50, 68), ("tq_3bit", 50, 52)])
def test_slots_of_a_128_wide_head(name, k, v):
    fmt = get_format(name)
    assert (fmt.row_bytes(128, "k"), fmt.row_bytes(128, "v")) == (k, v)
    assert get_format("turboquant_" + {"tq_k8v4": "k8v4", "tq_4bit": "4bit_nc",
                                       "tq_k3v4": "k3v4_nc", "tq_3bit": "3bit_nc"}[name]) is fmt


def test_an_odd_slot_is_rounded_up_to_even():
    # a 72-wide head under k3v4: 27 + 2 bytes of key, 36 + 4 of value = 69 → 70
    fmt = get_format("tq_k3v4")
    assert fmt.row_bytes(72, "k") == 29 and fmt.row_bytes(72, "v") == 41


@pytest.mark.parametrize(("kv", "block", "per_token", "blocks"), [
    # Llama-3.1-8B: 28 layers of 8 heads × the slot, layers 0, 1, 30 and 31 at bf16 (8 × 512)
    ("tq_4bit", 64, 28 * 8 * 134 + 4 * 8 * 512, 3615),
    ("tq_k8v4", 64, 28 * 8 * 196 + 4 * 8 * 512, 2782),
])
def test_dense_model_keeps_its_boundary_layers_at_bf16(kv, block, per_token, blocks):
    r = plan("llama-3.1-8b", kv)
    # one group of full-attention layers, a block the sum of their pages
    assert blocks == 10 * GiB // (per_token * block)
    assert (r.blocks, r.block_tokens, r.kv_tokens) == (blocks, block, blocks * block)
    assert any("layers 0, 1, 30, 31 at the model's dtype" in n for n in r.notes)


def test_block_16_grows_to_32():
    # the first layer's (native) backend prices the packed dtype at a byte a value: a block
    # of 16 holds 8 tokens of a bf16 layer, so the block doubles; the command keeps 16
    r = plan("llama-3.1-8b", "tq_3bit", block_size=16)
    per_token = 28 * 8 * 102 + 4 * 8 * 512
    assert r.block_tokens == 32 and r.blocks == 10 * GiB // (per_token * 32)
    assert r.command.endswith("--kv-cache-dtype turboquant_3bit_nc --block-size 16")
    assert any("grows from 16 to 32" in n for n in r.notes)
    assert plan("llama-3.1-8b", "tq_3bit", block_size=128).block_tokens == 128


def test_hybrid_model_quantizes_every_attention_layer():
    spec = load_model("qwen3-next-80b-a3b-instruct")
    r = plan(None, "tq_4bit", spec=spec)
    # a 256-wide head: 128 + 2 and 128 + 4 = 262 bytes, no boundary layers
    assert any("262-byte slot" in n and "no boundary layers" in n for n in r.notes)
    base = plan(None, "bf16", spec=spec)
    assert r.kv_tokens > base.kv_tokens


def _llama(head_dim):
    return spec_from_config({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                             "hidden_size": 32 * head_dim, "num_attention_heads": 32,
                             "num_key_value_heads": 8, "num_hidden_layers": 8,
                             "intermediate_size": 8192, "vocab_size": 32000,
                             "max_position_embeddings": 8192, "torch_dtype": "bfloat16"},
                            name="test", source="test")


@pytest.mark.parametrize(("model", "kv", "words"), [
    ("deepseek-v2-lite-chat", "tq_4bit", "no MLA attention backend of vLLM 0.34.0"),
    ("llama-4-scout-17b-16e-instruct", "tq_4bit", "chunked layers"),
    # its first full-attention layer is a boundary layer: a page twice the shared one
    ("gpt-oss-20b", "tq_4bit", "layers 1, 23 (full attention) kept at the model's dtype"),
])
def test_refused_in_one_line(model, kv, words):
    with pytest.raises(InputError) as e:
        plan(model, kv)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_rotation_needs_a_power_of_two_head():
    with pytest.raises(InputError) as e:
        plan(None, "tq_4bit", spec=_llama(80))
    assert "power-of-two head sizes; this model's is 80" in str(e.value)
    # fp8 keys are not rotated: k8v4 takes it (80 + 40 + 4 = 124 bytes a head)
    r = plan(None, "tq_k8v4", spec=_llama(80))
    assert any("124-byte slot" in n for n in r.notes)


def test_command_reader_and_other_engines():
    launch = read_command("vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype "
                          "turboquant_k3v4_nc")
    assert launch.settings["kv"] == "tq_k3v4"
    with pytest.raises(InputError):
        engine_plan("sglang", EngineRequest(spec=load_model("llama-3.1-8b"), context=8192,
                                            sequences=1, kv_budget_bytes=GiB,
                                            cache=CacheOptions(kv_k="tq_4bit",
                                                               kv_v="tq_4bit")))


@pytest.mark.parametrize(("kv", "per_head"), [
    # TRITON_ATTN's customize_spec: each side's data (int4: two values a byte) and one fp32
    # scale a head and token
    ("int8_pth", 128 + 4 + 128 + 4), ("int4_pth", 64 + 4 + 64 + 4)])
def test_integer_per_token_head_caches(kv, per_head):
    r = plan("llama-3.1-8b", kv)
    blocks = 10 * GiB // (32 * 8 * per_head * 64)
    assert (r.blocks, r.kv_tokens) == (blocks, blocks * 64)
    flag = {"int8_pth": "int8_per_token_head", "int4_pth": "int4_per_token_head"}[kv]
    assert r.command.endswith(f"--kv-cache-dtype {flag}")
    assert read_command(f"vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype {flag}"
                        ).settings["kv"] == kv
    with pytest.raises(InputError) as e:
        plan("deepseek-v2-lite-chat", kv)
    assert "no vLLM MLA backend" in str(e.value)


def test_nvfp4_4over6_is_nvfp4s_layout_on_sm100_only():
    # the same pages as nvfp4 (64 + 8 bytes a 128-wide side), on B200; FlashInfer's FA2
    # writer (SM8x, SM90, SM12x) has no scale search, so no backend takes it there
    def on(gpu, kv):
        return engine_plan("vllm", EngineRequest(
            spec=load_model("llama-3.1-8b"), context=8192, sequences=1,
            cache=CacheOptions(kv_k=kv, kv_v=kv), gpus=(find_gpu(gpu),)))

    four, base = on("b200", "nvfp4_4over6"), on("b200", "nvfp4")
    assert four.blocks == base.blocks and four.blocks > 0
    assert four.command.endswith("--kv-cache-dtype nvfp4_4over6")
    assert read_command("vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype nvfp4_4over6"
                        ).settings["kv"] == "nvfp4_4over6"
    for gpu in ("h100", "rtx5090"):
        assert on(gpu, "nvfp4").blocks > 0
        with pytest.raises(InputError) as e:
            on(gpu, "nvfp4_4over6")
        assert "stores nvfp4_4over6 on SM10x only" in str(e.value)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3.5-27b"])
def test_nvfp4_is_refused_off_nvidia(model):
    # no ROCm attention backend lists nvfp4; FlashInfer, which does, is CUDA's
    with pytest.raises(InputError) as e:
        engine_plan("vllm", EngineRequest(
            spec=load_model(model), context=8192, sequences=1,
            cache=CacheOptions(kv_k="nvfp4", kv_v="nvfp4"), gpus=(find_gpu("mi300x"),)))
    assert "only FlashInfer stores it, on NVIDIA cards" in str(e.value)


def test_ultraquant_on_rocm_packs_its_slot_and_keeps_the_boundary_layers():
    # ultraquant_4bit: a 128-wide head's K and V each 64 bytes of e2m1 codes + 4 e8m0 scales,
    # 136 bytes a slot; layers 0, 1, 30, 31 at bf16 as under TurboQuant
    def on(gpu, model="llama-3.1-8b"):
        return engine_plan("vllm", EngineRequest(
            spec=load_model(model), context=8192, sequences=1,
            cache=CacheOptions(kv_k="uq_4bit", kv_v="uq_4bit"), gpus=(find_gpu(gpu),),
            kv_budget_bytes=10 * GiB))

    r = on("mi300x")
    per_token = 28 * 8 * 136 + 4 * 8 * 512
    assert r.blocks == 10 * GiB // (per_token * r.block_tokens)
    assert r.command.endswith("--kv-cache-dtype ultraquant_4bit")
    assert any("136-byte slot a token (UltraQuant backend)" in n for n in r.notes)
    assert read_command("vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype ultraquant_4bit"
                        ).settings["kv"] == "uq_4bit"
    for gpu, model, words in (("h100", "llama-3.1-8b", "on ROCm only"),
                              ("mi300x", "llama-2-7b-hf", "bfloat16 models only"),
                              ("mi300x", "gpt-oss-20b", "attention sinks")):
        with pytest.raises(InputError) as e:
            on(gpu, model)
        assert words in str(e.value) and "\n" not in str(e.value)
