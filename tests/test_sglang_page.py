"""SGLang 0.5.23's own attention backend and KV page where the command names none
(kvcore/engines/sglang_page.py): on SM100 its backends page the cache themselves."""

import pytest

from kvcore import CacheOptions, find_gpu, load_model
from kvcore.engines import EngineRequest, EngineSettings, engine_plan
from kvcore.engines.sglang_page import resolve
from kvcore.parallel import Parallel

GiB = 1024**3
BUDGET = 10 * GiB  # 10,737,418,240 bytes a rank for the pools


def req(model, gpu, kv="f16", ctx=8192, **kw):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=1,
                         cache=CacheOptions(kv_k=kv, kv_v=kv), gpus=(find_gpu(gpu),),
                         kv_budget_bytes=BUDGET, **kw)


@pytest.mark.parametrize(("model", "gpu", "asked", "backend", "page"), [
    # the generic MHA rule: trtllm_mha on SM100 (B300 is SM103, the same family), 64-token
    # pages unless 16, 32, 64 or 128 is asked
    ("llama-3.1-8b", "b200", None, "trtllm_mha", 64),
    ("llama-3.1-8b", "b300", None, "trtllm_mha", 64),
    ("llama-3.1-8b", "b200", 16, "trtllm_mha", 16),
    ("llama-3.1-8b", "b200", 128, "trtllm_mha", 128),
    ("llama-3.1-8b", "b200", 8, "trtllm_mha", 64),
    ("llama-3.1-8b", "b200", 256, "trtllm_mha", 64),
    # the overrides that pick trtllm_mha on SM100
    ("gpt-oss-20b", "b200", None, "trtllm_mha", 64),
    ("gemma-4-31b-it", "b200", 32, "trtllm_mha", 32),
    ("nemotron-3-nano-30b-a3b", "b200", None, "trtllm_mha", 64),
    # DeepSeek-V3's override: trtllm_mla, 32 or 64 kept, else 64 (Kimi-K2 shares the class)
    ("deepseek-v3", "b200", None, "trtllm_mla", 64),
    ("kimi-k2-instruct", "b200", 32, "trtllm_mla", 32),
    ("deepseek-v3", "b200", 128, "trtllm_mla", 64),
    ("kimi-k3", "b200", None, "trtllm_mla", 64),
    # DeepSeek-V2 is not on that override's list: the generic MLA rule, FlashInfer
    ("deepseek-v2-lite-chat", "b200", None, "flashinfer", 1),
    ("deepseek-v2-lite-chat", "b200", 8, "flashinfer", 8),
    ("kimi-linear-48b-a3b-instruct", "b200", None, "flashinfer", 1),
    # MiMo-V2-Flash: fa4, 128-token pages whatever is asked
    ("mimo-v2-flash", "b200", None, "fa4", 128),
    ("mimo-v2-flash", "b200", 16, "fa4", 128),
    # Qwen3.5's override: Triton at a page of 1 over any --page-size (radix cache on, no draft)
    ("qwen3.5-27b", "b200", None, "triton", 1),
    ("qwen3.5-27b", "b200", 16, "triton", 1),
    ("qwen3-next-80b-a3b-instruct", "b200", None, "triton", 1),
])
def test_default_backend_and_page_on_sm100(model, gpu, asked, backend, page):
    r = resolve(load_model(model), find_gpu(gpu), asked)
    assert (r.backend, r.page) == (backend, page)
    assert (r.note is None) == (page == (asked or 1))


@pytest.mark.parametrize("gpu", ["h100", "h200", "a100-80gb", "rtx-4090", "rtx-5090", "mi300x"])
@pytest.mark.parametrize("model", ["llama-3.1-8b", "deepseek-v3", "mimo-v2-flash", "qwen3.5-27b"])
def test_other_cards_run_the_page_asked(model, gpu):
    spec = load_model(model)
    assert resolve(spec, find_gpu(gpu), None).page == 1
    assert resolve(spec, find_gpu(gpu), 16).page == 16
    assert resolve(spec, None, 32).page == 32


def test_qwen_hybrid_takes_trtllm_mha_without_the_radix_cache_or_with_a_draft():
    spec, b200 = load_model("qwen3.5-27b"), find_gpu("b200")
    assert resolve(spec, b200, None, radix_cache=False).page == 64
    assert resolve(spec, b200, 16, radix_cache=False).page == 64  # the override's page
    assert resolve(spec, b200, None, draft=True).backend == "trtllm_mha"
    # a draft with a page over 1: the trtllm branch is skipped (FlashInfer, then Triton)
    assert (resolve(spec, b200, 16, draft=True).backend, resolve(spec, b200, 16, draft=True).page
            ) == ("triton", 1)
    llama = load_model("llama-3.1-8b")
    assert (resolve(llama, b200, 16, draft=True).backend,
            resolve(llama, b200, 16, draft=True).page) == ("flashinfer", 16)


def test_llama_pool_on_b200_is_rounded_to_64_token_pages():
    # Llama-3.1-8B bf16: 32 layers × 8 heads × 128 × 2 bytes × (K + V) = 131,072 bytes a token;
    # 10 GiB // 131,072 = 81,920 exactly, so take 10 GiB less 1 MiB: 81,912 → 81,856 at 64
    r = engine_plan("sglang", EngineRequest(
        spec=load_model("llama-3.1-8b"), context=8192, sequences=1,
        cache=CacheOptions(kv_k="f16", kv_v="f16"), gpus=(find_gpu("b200"),),
        kv_budget_bytes=BUDGET - 2**20))
    assert r.extra["cell_bytes"] == 131072
    assert r.kv_tokens == 81856 and r.block_tokens == 64
    # K: (81,856 + 64) × 65,536 bytes = 5,368,709,120 = 5.00 GiB
    assert "#tokens: 81856, K size: 5.00 GB, V size: 5.00 GB" in r.log_lines[-1]
    assert any("default attention backend for this model on SM100 is trtllm_mha" in n
               for n in r.notes)
    h100 = engine_plan("sglang", EngineRequest(
        spec=load_model("llama-3.1-8b"), context=8192, sequences=1,
        cache=CacheOptions(kv_k="f16", kv_v="f16"), gpus=(find_gpu("h100"),),
        kv_budget_bytes=BUDGET - 2**20))
    assert h100.kv_tokens == 81912 and h100.block_tokens == 1
    assert not any("SM100" in n for n in h100.notes)


def test_page_asked_is_replaced_with_a_note():
    r = engine_plan("sglang", req("llama-3.1-8b", "b200",
                                  settings=EngineSettings(page_size=8)))
    assert r.block_tokens == 64
    assert any("--page-size 8 becomes 64" in n for n in r.notes)
    kept = engine_plan("sglang", req("llama-3.1-8b", "b200",
                                     settings=EngineSettings(page_size=32)))
    assert kept.block_tokens == 32 and not any("becomes" in n for n in kept.notes)


def test_mimo_sliding_pools_on_b200_use_fa4_pages():
    r = engine_plan("sglang", req("mimo-v2-flash", "b200", ctx=4096,
                                  parallel=Parallel(tp=8)))
    assert r.block_tokens == 128
    assert r.kv_tokens % 128 == 0


def test_fp4_mx_block16_follows_qwen35_triton_default_on_sm100():
    # the Qwen3.5 override's Triton reads FP4 caches, at its page of 1
    r = engine_plan("sglang", req("qwen3.5-27b", "b200", kv="fp4_mx16",
                                  settings=EngineSettings(page_size=16)))
    assert r.block_tokens == 1
    assert "--attention-backend" not in r.command
    assert any("triton, in pages of 1 token" in n for n in r.notes)
    # Llama keeps trtllm_mha's pages
    assert engine_plan("sglang", req("llama-3.1-8b", "b200", kv="fp4_mx16")).block_tokens == 64


@pytest.mark.parametrize(("model", "gpu", "backend", "asked", "page"), [
    # the page rules apply to a backend given as to one SGLang picks, on any card
    ("llama-3.1-8b", "h100", "trtllm_mha", None, 64),
    ("llama-3.1-8b", "h100", "trtllm_mha", 32, 32),
    ("llama-3.1-8b", "rtx-5090", "trtllm_mha", 8, 64),
    ("llama-3.1-8b", "b200", "fa4", 16, 128),
    ("llama-3.1-8b", "h100", "fa4", 16, 16),      # fa4's 128-token pages are SM100's
    ("llama-3.1-8b", "b200", "flashinfer", None, 1),
    ("llama-3.1-8b", "b200", "triton", 8, 8),
    ("qwen3.5-27b", "b200", "trtllm_mha", 16, 16),  # the Qwen override runs only unset
    ("deepseek-v3", "h200", "flashmla", 16, 64),
    ("deepseek-v3", "b200", "trtllm_mla", 32, 32),
    ("deepseek-v3", "b200", "cutedsl_mla", 128, 64),
    ("deepseek-v3", "b200", "tokenspeed_mla", None, 64),  # cutedsl_mla's old name
    ("llama-3.1-8b", "h100", "hpc_ops", None, 64),
    ("llama-3.1-8b", "mi300x", "aiter", 16, 16),
    ("llama-3.1-8b", "l40s", "fa3", 8, 8),  # SM89: fa3 asserts major 8 or 9
])
def test_backend_given_sets_the_page(model, gpu, backend, asked, page):
    r = engine_plan("sglang", req(model, gpu, settings=EngineSettings(
        attention_backend=backend, page_size=asked),
        **({"parallel": Parallel(tp=8)} if model == "deepseek-v3" else {})))
    assert r.block_tokens == page
    assert r.kv_tokens % page == 0
    named = {"tokenspeed_mla": "cutedsl_mla"}.get(backend, backend)
    assert f"--attention-backend {named}" in r.command
    assert any(f"{named} backend runs pages" in n for n in r.notes) == (page != (asked or 1))


@pytest.mark.parametrize(("model", "gpu", "backend", "says"), [
    ("llama-3.1-8b", "h100", "nope", "takes one of SGLang 0.5.23's backends"),
    ("llama-3.1-8b", "h100", "trtllm_mla", "can only be used with MLA models"),
    ("llama-3.1-8b", "h100", "flashmla", "can only be used with MLA models"),
    ("deepseek-v2-lite-chat", "b200", "trtllm_mha", "non-MLA models"),
    ("llama-3.1-8b", "a100-80gb", "trtllm_mha", "needs Hopper"),
    ("llama-3.1-8b", "b200", "fa3", "SM8x (MHA models) and SM90"),
    ("deepseek-v2-lite-chat", "a100-80gb", "fa3", "SM8x (MHA models) and SM90"),
    ("llama-3.1-8b", "mi300x", "flashinfer", "runs on NVIDIA cards"),
    ("llama-3.1-8b", "h100", "aiter", "runs on AMD cards"),
    ("llama-3.1-8b", "b200", "hpc_ops", "Hopper (SM90) only"),
    ("llama-3.1-8b", "h100", "ascend", "another platform's"),
    ("llama-3.1-8b", "h100", "dsa", "is the backend of DeepSeek Sparse Attention"),
    ("deepseek-v3.2", "h200", "flashmla", "with its own backend, dsa"),
    ("minimax-m3", "h200", "fa3", "MiniMax-M3's sparse pool"),
])
def test_backend_sglang_refuses_is_refused_in_one_line(model, gpu, backend, says):
    import re
    from dataclasses import replace

    from kvcore import InputError

    spec = load_model(model)
    if model == "minimax-m3":  # the class SGLang registers for it
        spec = replace(spec, architecture="MiniMaxM3SparseForCausalLM",
                       architectures=("MiniMaxM3SparseForCausalLM",))
    with pytest.raises(InputError, match=re.escape(says)) as err:
        engine_plan("sglang", EngineRequest(
            spec=spec, context=8192, sequences=1, cache=CacheOptions(kv_k="f16", kv_v="f16"),
            gpus=(find_gpu(gpu),), kv_budget_bytes=BUDGET,
            settings=EngineSettings(attention_backend=backend)))
    assert err.value.field == "attention_backend"
    assert "\n" not in str(err.value)


def test_backend_through_cli_api_form_and_command(capsys):
    import json

    from fastapi.testclient import TestClient

    from app.cli import main
    from app.web import create_app
    from kvcore.command import read_command

    assert main(["llama-3.1-8b", "--engine", "sglang", "--gpu", "h100", "--ctx", "8k",
                 "--attention-backend", "trtllm_mha", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine_report"]["block_tokens"] == 64
    assert main(["llama-3.1-8b", "--engine", "sglang", "--gpu", "a100-80gb",
                 "--attention-backend", "trtllm_mha"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs Hopper" in err[0]
    # another engine's plan refuses the setting
    assert main(["llama-3.1-8b", "--engine", "vllm", "--gpu", "h100",
                 "--attention-backend", "fa3"]) == 2
    client = TestClient(create_app())
    got = client.post("/api/v1/plan", json={"model": "llama-3.1-8b", "engine": "sglang",
                                            "gpu": "b200", "context": 8192,
                                            "attention_backend": "fa4"})
    assert got.status_code == 200 and got.json()["engine_report"]["block_tokens"] == 128
    bad = client.post("/api/v1/plan", json={"model": "llama-3.1-8b", "engine": "sglang",
                                            "gpu": "h100", "attention_backend": "flashmla"})
    assert bad.status_code == 422 and bad.json()["field"] == "attention_backend"
    page = client.get("/", params={"model": "llama-3.1-8b", "engine": "sglang", "gpu": "h100",
                                   "context": "8k", "attention_backend": "trtllm_mha"})
    assert page.status_code == 200 and "trtllm_mha backend runs pages" in page.text
    assert 'name="attention_backend"' in page.text
    launch = read_command("python -m sglang.launch_server --model-path x "
                          "--attention-backend TRTLLM_MHA")
    assert launch.settings["attention_backend"] == "trtllm_mha"
    assert not [n for n in launch.notes if "backend" in n]


@pytest.mark.parametrize("model", ["olmo-3.1-32b-instruct", "exaone-4.0-32b"])
def test_fa3_override_off_sm8x_sm90_sm100_is_refused_unless_a_backend_is_given(model):
    from kvcore import InputError

    def plan(gpu, **kw):
        return engine_plan("sglang", EngineRequest(
            spec=load_model(model), context=8192, sequences=1,
            cache=CacheOptions(kv_k="f16", kv_v="f16"), gpus=(find_gpu(gpu),),
            kv_budget_bytes=2 * GiB, settings=EngineSettings(**kw)))

    for gpu in ("rtx-pro-6000", "dgx-spark"):
        with pytest.raises(InputError, match="override picks fa3") as err:
            plan(gpu)
        assert err.value.field == "attention_backend" and "\n" not in str(err.value)
        assert plan(gpu, attention_backend="flashinfer").kv_tokens > 0
    # fa3 runs there: SM8x and SM90; SM100 takes trtllm_mha; below SM80 Triton
    for gpu in ("a100-80gb", "h100", "b200"):
        assert plan(gpu).kv_tokens > 0
    from kvcore.engines.sglang_page import check_default

    for gpu in ("t4", "v100", "mi300x"):
        check_default(load_model(model), find_gpu(gpu))
