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


# --- the plan's own table prices the kept layers at the model's dtype (kv.kept_layers) -------

def test_the_table_prices_vllms_kept_layers_at_the_models_dtype():
    from app.common import make_query
    from kvcore import cache_size, get_format
    from kvcore.query import answer

    spec = load_model("llama-3.1-8b")
    ctx, seqs = 32768, 2
    tq, bf16, fp8 = get_format("tq_4bit"), get_format("bf16"), get_format("fp8_e4m3")
    # TurboQuant under vLLM: layers 0, 1, 30, 31 at bf16, 28 in tq_4bit (8 KV heads of 128)
    q = make_query(spec, context=ctx, sequences=seqs, engine="vllm", kv="tq_4bit",
                   gpu="h100")
    g = answer(q)["breakdown"][0]
    k = seqs * 8 * (28 * tq.bytes_for(ctx, 128, "k") + 4 * bf16.bytes_for(ctx, 128, "k"))
    v = seqs * 8 * (28 * tq.bytes_for(ctx, 128, "v") + 4 * bf16.bytes_for(ctx, 128, "v"))
    assert (g["k_bytes"], g["v_bytes"], g["kept_layers"], g["kept_format"]) == (k, v, 4, "bf16")
    # the same query under the raw engine keeps every layer in the format
    raw = answer(make_query(spec, context=ctx, sequences=seqs, engine="raw", kv="tq_4bit",
                            gpu="h100"))["breakdown"][0]
    assert raw["k_bytes"] == seqs * 8 * 32 * tq.bytes_for(ctx, 128, "k")
    assert raw["kept_layers"] == 0
    # a skip list beside fp8: the kept layers carry no tensor scale
    opts = CacheOptions(kv_k=fp8, kv_v=fp8, vllm_skip=("0", "31"))
    size = cache_size(spec, ctx, 1, opts)
    assert size.k_bytes == 8 * ctx * (30 * 128 + 2 * 256)
    assert size.groups[0].scale_bytes == 30 * 2 * fp8.tensor_scale_bytes
    # a cache in the model's dtype keeps nothing apart
    assert cache_size(spec, ctx, 1, CacheOptions(kv_k=bf16, kv_v=bf16,
                                                 vllm_skip=("0",))).groups[0].kept_layers == 0


def test_kept_layers_reach_the_rates_the_quality_note_and_the_cli_line(capsys):
    from app.cli import main
    from kvcore import bytes_per_token, get_format
    from kvcore.query import quality_here

    spec = load_model("llama-3.1-8b")
    tq = get_format("tq_4bit")
    opts = CacheOptions(kv_k=tq, kv_v=tq, vllm_skip=())
    row = tq.row_bytes(128, "k") + tq.row_bytes(128, "v")
    assert bytes_per_token(spec, opts) == 8 * (28 * row + 4 * 512)
    bits, note = quality_here(spec, opts)
    assert bits == round(16 * (28 * row + 4 * 512) / (32 * 512), 4)
    assert "(vLLM keeps 4 of its layers in bf16)" in note
    assert "bits a value on this model" not in quality_here(
        spec, CacheOptions(kv_k=tq, kv_v=tq))[1]
    assert main(["llama-3.1-8b", "--engine", "vllm", "--gpu", "4090", "--ctx", "32k",
                 "--kv", "tq_4bit"]) == 0
    out = capsys.readouterr().out
    assert "32,768 tokens each; 4 of them in bf16 (kept unquantized)" in out


def test_the_page_names_the_kept_layers():
    from app.web import create_app

    page = TestClient(create_app()).get("/", params={
        "model": "llama-3.1-8b", "gpu": "4090", "context": "32k", "engine": "vllm",
        "kv_k": "tq_4bit", "kv_v": "tq_4bit"}, headers={"HX-Request": "true"})
    assert "32 full layers × 8 KV heads × 128; 4 of them in bf16 (kept unquantized)" in page.text
