"""vLLM 0.34.0's --kv-cache-dtype-skip-layers and TurboQuant's boundary layers beside
sliding-window layers: the shared page, each spec's block and the groups, worked by hand
(kvcore/engines/vllm_skip.py, docs/ENGINES.md V6b)."""

import pytest
from fastapi.testclient import TestClient

from kvcore import CacheOptions, InputError, load_model
from kvcore.command import read_command
from kvcore.engines import EngineRequest, EngineSettings, engine_plan

GiB = 1024**3
BUDGET = 10 * GiB


def plan(model, kv, skip=None, **settings):
    return engine_plan("vllm", EngineRequest(
        spec=load_model(model), context=8192, sequences=1,
        cache=CacheOptions(kv_k=kv, kv_v=kv), kv_budget_bytes=BUDGET,
        settings=EngineSettings(kv_cache_dtype_skip_layers=skip, **settings)))


def test_dense_model_keeps_the_listed_layers_at_bf16_in_the_same_blocks():
    # Llama-3.1-8B, fp8 with layers 0 and 31 at bf16: one group, a block 64 × (30 layers of
    # 8 × 256 bytes + 2 of 8 × 512)
    r = plan("llama-3.1-8b", "fp8_e4m3", "0,31")
    per_token = 30 * 8 * 256 + 2 * 8 * 512
    assert (r.blocks, r.block_tokens) == (BUDGET // (64 * per_token), 64)
    assert r.command.endswith("--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 31")
    assert any("layers 0, 31 at the model's dtype" in n for n in r.notes)
    # --block-size 16: a block of fp8 priced a byte a value must hold 16 bf16 tokens → 32
    r16 = plan("llama-3.1-8b", "fp8_e4m3", "0,31", block_size=16)
    assert (r16.block_tokens, r16.blocks) == (32, BUDGET // (32 * per_token))
    assert any("grows from 16 to 32" in n for n in r16.notes)


def test_gemma3_fp8_sliding_window_layers_at_bf16():
    # Gemma-3-27B: 16 KV heads of 128, 10 full and 52 sliding layers, block 64. The shared
    # page is 64 tokens of fp8 (64 × 16 × 256 = 262,144 B); a bf16 sliding layer holds 32
    # tokens in it. Two buckets (10 full, 52 sliding) → groups of 10 layers: 1 + 6
    r = plan("gemma-3-27b-it", "fp8_e4m3", "sliding_window")
    assert r.blocks == BUDGET // (262144 * 10)
    note = next(n for n in r.notes if n.startswith("--kv-cache-dtype-skip-layers"))
    assert "52 layers at the model's dtype" in note and "262,144 bytes" in note
    assert "64 tokens of a full-attention layer, 32 tokens of a skipped sliding-window" in note
    # a shorter context fits than with every layer in fp8, a longer one than in bf16
    fp8, bf16 = plan("gemma-3-27b-it", "fp8_e4m3"), plan("gemma-3-27b-it", "bf16")
    assert bf16.max_context < r.max_context < fp8.max_context


def test_gemma3_turboquant_pages_are_padded_to_the_fp8_page():
    # tq_4bit: boundary layers 0, 1, 60, 61 (all sliding) at bf16. Every page is 262,144 B:
    # a full layer's 64 × 16 × 134 = 137,216 B padded to it; a quantized sliding layer takes
    # the largest TurboQuant kernel block within it (2,144 B a token → 64), a skipped one 32.
    # Three buckets (10 full, 48 quantized sliding, 4 skipped) → groups of 4: 3 + 12 + 1
    r = plan("gemma-3-27b-it", "tq_4bit", language_model_only=True)
    assert r.blocks == BUDGET // (262144 * 4)
    assert any("64 tokens of a full-attention layer, 32 tokens of a skipped sliding-window "
               "layer, 64 tokens of a quantized sliding-window layer" in n for n in r.notes)
    # the padding leaves TurboQuant no smaller than fp8 here
    fp8 = plan("gemma-3-27b-it", "fp8_e4m3", language_model_only=True)
    assert r.max_context < fp8.max_context
    # with images served, Gemma 3's image-prefix attention has no TurboQuant backend
    with pytest.raises(InputError) as e:
        plan("gemma-3-27b-it", "tq_4bit")
    assert "image-prefix" in str(e.value) and "--language-model-only" in str(e.value)


def test_a_list_that_matches_nothing_still_aligns_the_pool():
    r = plan("llama-3.1-8b", "fp8_e4m3", "sliding_window", block_size=16)
    assert r.block_tokens == 32
    assert any("no layer of this model matches it" in n for n in r.notes)
    same = plan("llama-3.1-8b", "bf16", "0")
    assert same.blocks == plan("llama-3.1-8b", "bf16").blocks
    assert any("changes nothing" in n for n in same.notes)


@pytest.mark.parametrize(("model", "kv", "skip", "words"), [
    ("llama-3.1-8b", "fp8_e4m3", "32", "this model's layers are 0 to 31"),
    ("llama-3.1-8b", "fp8_e4m3", "first", "takes layer indices as vLLM matches them"),
    ("llama-3.1-8b", "fp8_e4m3", "01", "no sign or leading zero"),
    ("llama-3.1-8b", "fp8_e4m3", "Sliding_Window", "got 'Sliding_Window'"),
    ("llama-3.1-8b", "int8_pth", "0", "beside fp8_e4m3, fp8_e5m2, nvfp4 and the TurboQuant"),
    ("gemma-3-27b-it", "fp8_e4m3", "5", "layers 5 (full attention) kept at the model's dtype"),
    ("qwen3-next-80b-a3b-instruct", "fp8_e4m3", "3", "hybrid recurrent model"),
    ("deepseek-v2-lite-chat", "fp8_e4m3", "0", "beside mla layers"),
])
def test_refused_in_one_line(model, kv, skip, words):
    with pytest.raises(InputError) as e:
        plan(model, kv, skip)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_other_engines_refuse_it(capsys):
    from app.cli import main

    assert main(["llama-3.1-8b", "--engine", "sglang", "--kv", "fp8_e4m3", "--gpu", "h100",
                 "--kv-cache-dtype-skip-layers", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "kv_cache_dtype_skip_layers is a setting of vLLM" in err and "\n" not in err


def test_through_the_command_cli_and_api(capsys):
    import json

    from app.cli import main
    from app.web import create_app

    launch = read_command("vllm serve google/gemma-3-27b-it --kv-cache-dtype fp8 "
                          "--kv-cache-dtype-skip-layers sliding_window 0")
    assert launch.settings["kv_cache_dtype_skip_layers"] == "sliding_window,0"
    main(["gemma-3-27b-it", "--engine", "vllm", "--kv", "fp8_e4m3", "--gpu", "h100",
          "--kv-cache-dtype-skip-layers", "sliding_window", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["engine_report"]["command"].endswith("--kv-cache-dtype-skip-layers sliding_window")
    client = TestClient(create_app())
    body = {"model": "gemma-3-27b-it", "engine": "vllm", "gpu": "h100", "context": 8192,
            "kv": "fp8_e4m3"}
    got = client.post("/api/v1/plan", json={**body, "kv_cache_dtype_skip_layers":
                                           ["sliding_window"]})
    assert got.status_code == 200, got.text
    assert got.json()["engine_report"]["max_context"] == out["engine_report"]["max_context"]
    numbers = client.post("/api/v1/plan", json={**body, "kv_cache_dtype_skip_layers": [0, 61]})
    assert numbers.json()["engine_report"]["command"].endswith("--kv-cache-dtype-skip-layers 0 61")
    bad = client.post("/api/v1/plan", json={**body, "kv_cache_dtype_skip_layers": "99"})
    assert bad.status_code == 422 and bad.json()["field"] == "kv_cache_dtype_skip_layers"
    page = client.get("/", params={"model": "gemma-3-27b-it", "engine": "vllm", "gpu": "h100",
                                   "context": "8k", "kv_k": "fp8_e4m3", "kv_v": "fp8_e4m3",
                                   "kv_cache_dtype_skip_layers": "sliding_window"})
    assert page.status_code == 200 and "52 layers at the model&#39;s dtype" in page.text


@pytest.mark.parametrize(("gpu", "skip", "block"), [
    # the first layer's backend prices nvfp4: FlashInfer packs it (2 × (64 + 8) bytes a head of
    # 128), FLASH_ATTN counts a byte a value (256). A block must hold 16 bf16 tokens (512 bytes
    # a head each): packed, 16 × ceil(8,192 / (16 × 144)) = 64; a byte a value, 32
    ("b200", "0,31", 64),   # layer 0 skipped, but SM100's first 16-bit backend is FlashInfer
    ("h100", "0,31", 32),   # layer 0 skipped on FLASH_ATTN
    ("h100", "31", 64),     # layer 0 quantized: FlashInfer
])
def test_nvfp4_beside_skipped_layers_grows_the_block_by_the_first_layers_backend(gpu, skip,
                                                                                 block):
    from kvcore import find_gpu

    r = engine_plan("vllm", EngineRequest(
        spec=load_model("llama-3.1-8b"), context=8192, sequences=1,
        cache=CacheOptions(kv_k="nvfp4", kv_v="nvfp4"), gpus=(find_gpu(gpu),),
        kv_budget_bytes=BUDGET, settings=EngineSettings(kv_cache_dtype_skip_layers=skip,
                                                        block_size=16)))
    kept = len(skip.split(","))
    per_token = (32 - kept) * 8 * 144 + kept * 8 * 512
    assert (r.block_tokens, r.blocks) == (block, BUDGET // (block * per_token))
    with pytest.raises(InputError) as e:
        engine_plan("vllm", EngineRequest(
            spec=load_model("gemma-3-27b-it"), context=8192, sequences=1,
            cache=CacheOptions(kv_k="nvfp4", kv_v="nvfp4"), gpus=(find_gpu(gpu),),
            kv_budget_bytes=BUDGET, settings=EngineSettings(kv_cache_dtype_skip_layers="0")))
    assert "beside nvfp4 in a sliding-window model" in str(e.value)
