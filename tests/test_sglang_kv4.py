"""SGLang 0.5.23's block-scaled KV caches (--kv-cache-dtype nvfp4, fp4_mx_block16, mxfp8):
pools worked by hand from its formulas (kvcore/engines/sglang_kv4.py, docs/ENGINES.md)."""

import pytest
from fastapi.testclient import TestClient

from kvcore import CacheOptions, InputError, find_gpu, load_model
from kvcore.command import read_command
from kvcore.engines import EngineRequest, EngineSettings, engine_plan

GiB = 1024**3
BUDGET = 10 * GiB  # 10,737,418,240 bytes a rank for the pools


def req(model, kv, gpu=None, ctx=8192, seqs=1, budget=BUDGET, mtp=False, **kw):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k=kv, kv_v=kv, mtp=mtp),
                         gpus=(find_gpu(gpu),) if gpu else (), kv_budget_bytes=budget, **kw)


def test_nvfp4_on_sm100_keeps_one_scale_layout_in_64_token_pages():
    # Llama-3.1-8B: 32 layers × 8 heads × (64 bytes of e2m1 + 8 fp8 scales) × (K + V) = 36,864
    # bytes a token; 10 GiB // 36,864 = 291,271, down to a 64-token page: 291,264
    r = engine_plan("sglang", req("llama-3.1-8b", "nvfp4", "b200"))
    assert r.extra["cell_bytes"] == 36864
    assert r.kv_tokens == 291264 and r.block_tokens == 64
    # K: (291,264 + 64) × 18,432 bytes = 5.0009 GiB
    assert r.log_lines[-1] == ("KV Cache is allocated. dtype: torch.float4_e2m1fn_x2, "
                               "#tokens: 291264, K size: 5.00 GB, V size: 5.00 GB")
    assert r.command.endswith("--kv-cache-dtype nvfp4")
    assert any("nvfp4 on SM100" in n for n in r.notes)


def test_nvfp4_on_sm120_adds_the_fp8_prefill_workspace():
    # the dequant workspace: one layer's K and V in fp8, 8 heads × 128 × 2 = 2,048 bytes a token
    # beside the layers' 36,864; 10 GiB // 38,912 = 275,941 → 275,904 (64-token pages)
    r = engine_plan("sglang", req("llama-3.1-8b", "nvfp4", "rtx-5090"))
    assert r.extra["cell_bytes"] == 38912
    assert r.kv_tokens == 275904
    # K: (275,904 + 64) × (18,432 + 1,024) = 5,369,233,408 bytes
    assert "#tokens: 275904, K size: 5.00 GB, V size: 5.00 GB" in r.log_lines[-1]
    assert any("2,048 bytes a token" in n for n in r.notes)


def test_nvfp4_workspace_follows_the_heads_a_rank():
    from kvcore.parallel import Parallel

    # TP 2: 4 heads a rank, rows 18,432 and a workspace of 4 × 128 × 2 = 1,024
    r = engine_plan("sglang", req("llama-3.1-8b", "nvfp4", "rtx-5090", parallel=Parallel(tp=2)))
    assert r.extra["cell_bytes"] == 18432 + 1024


def test_fp4_mx_block16_on_hopper_runs_triton_at_the_page_asked():
    r = engine_plan("sglang", req("llama-3.1-8b", "fp4_mx16", "h100"))
    assert r.extra["cell_bytes"] == 36864
    # 10 GiB // 36,864 = 291,271 tokens at 1-token pages
    assert r.kv_tokens == 291271 and r.block_tokens == 1
    assert r.command.endswith("--kv-cache-dtype fp4_mx_block16 --attention-backend triton")


def test_fp4_mx_block16_on_sm100_keeps_the_default_trtllm_mha():
    r = engine_plan("sglang", req("llama-3.1-8b", "fp4_mx16", "b200"))
    assert r.kv_tokens == 291264 and r.block_tokens == 64
    assert "--attention-backend" not in r.command


def test_fp4_mla_latent_and_its_log_without_scales():
    # DeepSeek-V2-Lite: 27 layers of a 576-value latent, 288 bytes of e2m1 + 36 scales = 324 a
    # layer, 8,748 a token; 10 GiB // 8,748 = 1,227,414 tokens
    r = engine_plan("sglang", req("deepseek-v2-lite-chat", "fp4_mx16", "h100"))
    assert r.extra["cell_bytes"] == 27 * 324
    assert r.kv_tokens == 1227414
    # MLATokenToKVPoolFP4 logs kv_buffer only: 1,227,415 × 27 × 288 = 8.889 GiB
    assert r.log_lines[-1] == ("KV Cache is allocated. dtype: torch.float4_e2m1fn_x2, "
                               "#tokens: 1227414, KV size: 8.89 GB")
    assert r.command.endswith("--attention-backend flashinfer")


def test_mxfp8_on_sm100_pages_fa4_in_128_tokens():
    # 32 layers × 8 heads × (128 fp8 + 4 e8m0 scales) × 2 = 67,584 bytes a token;
    # 10 GiB // 67,584 = 158,875 → 158,848 (128-token pages)
    r = engine_plan("sglang", req("llama-3.1-8b", "mxfp8", "b200"))
    assert r.extra["cell_bytes"] == 67584
    assert r.kv_tokens == 158848 and r.block_tokens == 128
    assert "dtype: torch.float8_e4m3fn, #tokens: 158848, K size: 5.00 GB" in r.log_lines[-1]
    assert r.command.endswith("--kv-cache-dtype mxfp8 --attention-backend fa4")


def test_mxfp8_sliding_window_pools_are_sized():
    # gpt-oss's SWAKVPool takes MXFP8 (the SWA branch builds MHATokenToKVPoolMXFP8)
    r = engine_plan("sglang", req("gpt-oss-20b", "mxfp8", "b200"))
    assert r.extra["swa_tokens"] is not None and r.fits


def test_hybrid_linear_pool_takes_nvfp4():
    from kvcore.formats import get_format
    from kvcore.kv import kv_row_bytes

    spec = load_model("qwen3-next-80b-a3b-instruct")
    fmt = get_format("nvfp4")
    r = engine_plan("sglang", req("qwen3-next-80b-a3b-instruct", "nvfp4", "b200"))
    assert r.extra["cell_bytes"] == sum(kv_row_bytes(spec, fmt, fmt))
    assert r.extra["mamba_slots"]


@pytest.mark.parametrize(("model", "kv", "gpu", "field", "words"), [
    ("llama-3.1-8b", "nvfp4", "h100", "gpu", "Blackwell SM100 or SM120"),
    ("llama-3.1-8b", "nvfp4", "thor", "gpu", "Blackwell SM100 or SM120"),
    ("llama-3.1-8b", "mxfp8", "h100", "gpu", "needs a Blackwell card"),
    ("llama-3.1-8b", "fp4_mx16", "mi300x", "gpu", "NVIDIA cards only"),
    ("deepseek-v2-lite-chat", "nvfp4", "b200", "kv_k", "MHA backend"),
    ("deepseek-v2-lite-chat", "mxfp8", "b200", "kv_k", "MHA pool"),
    ("gpt-oss-20b", "fp4_mx16", "b200", "kv_k", "SWAKVPool"),
    ("phi-3-mini-4k-instruct", "nvfp4", "b200", "kv_k", "multiples of 64"),
    ("deepseek-v3.2", "nvfp4", "b200", "kv_k", "not nvfp4"),
])
def test_refused_in_one_line(model, kv, gpu, field, words):
    with pytest.raises(InputError) as e:
        engine_plan("sglang", req(model, kv, gpu))
    assert e.value.field == field and words in str(e.value) and "\n" not in str(e.value)


def test_head_dim_96_takes_nvfp4_on_sm120_and_fp4_mx16_on_sm100():
    # Phi-3-mini's 96-value heads: not trtllm-gen's SM100 scale layout (multiples of 64), but
    # SM120's token-linear scales (multiples of 16) and fp4_mx_block16
    assert engine_plan("sglang", req("phi-3-mini-4k-instruct", "nvfp4", "rtx-5090")).fits
    assert engine_plan("sglang", req("phi-3-mini-4k-instruct", "fp4_mx16", "b200")).fits


@pytest.mark.parametrize(("kw", "field"), [({"mtp": True}, "mtp"),
                                           ({"settings": EngineSettings(offload_bytes=GiB)},
                                            "offload")])
def test_mtp_and_hicache_are_not_sized(kw, field):
    with pytest.raises(InputError) as e:
        engine_plan("sglang", req("llama-3.1-8b", "nvfp4", "b200", **kw))
    assert e.value.field == field


def test_cardless_nvfp4_is_sized_as_sm100_with_a_note():
    r = engine_plan("sglang", req("llama-3.1-8b", "nvfp4"))
    assert r.extra["cell_bytes"] == 36864
    assert any("on SM120 cards" in n for n in r.notes)


def test_other_engines_refuse_sglang_only_formats():
    for engine in ("vllm", "llama.cpp", "trtllm"):
        with pytest.raises(InputError):
            engine_plan(engine, req("llama-3.1-8b", "fp4_mx16", "b200", budget=None))


@pytest.mark.parametrize(("flag", "fmt"), [("fp4_mx_block16", "fp4_mx16"), ("nvfp4", "nvfp4"),
                                           ("mxfp8", "mxfp8")])
def test_command_reader_takes_the_flags(flag, fmt):
    launch = read_command("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
                          f"--kv-cache-dtype {flag}")
    assert launch.settings["kv"] == fmt


def test_api_plans_fp4_mx16():
    from app.web import create_app

    client = TestClient(create_app())
    got = client.post("/api/v1/plan", json={"model": "llama-3.1-8b", "engine": "sglang",
                                           "gpu": "h100", "context": 8192, "kv": "fp4_mx16"})
    assert got.status_code == 200, got.text
    assert "--attention-backend triton" in got.json()["engine_report"]["command"]
    bad = client.post("/api/v1/plan", json={"model": "llama-3.1-8b", "engine": "sglang",
                                           "gpu": "h100", "context": 8192, "kv": "nvfp4"})
    assert bad.status_code == 422 and "SM100" in bad.text


def test_minimax_m3_sparse_pool_is_refused():
    import json
    from pathlib import Path

    from kvcore import spec_from_config
    from kvcore.parallel import Parallel

    vl = json.loads((Path(__file__).parent / "data" / "configs" / "minimax-m3-vl.json")
                    .read_text())
    config = dict(vl["text_config"], torch_dtype="bfloat16", model_type="minimax_m3")
    spec = spec_from_config(config, name="MiniMaxAI/MiniMax-M3", source="test")
    with pytest.raises(InputError) as e:
        engine_plan("sglang", EngineRequest(
            spec=spec, context=8192, sequences=1, cache=CacheOptions(kv_k="nvfp4", kv_v="nvfp4"),
            gpus=(find_gpu("b200"),) * 8, parallel=Parallel(tp=8)))
    assert "MiniMax-M3 sparse pool" in str(e.value)


def test_fp8_prefill_on_sm100_keeps_both_scale_layouts_and_the_workspace():
    # --prefill-kv-cache-dequant-dtype fp8_e4m3 on SM100: FlashInfer's token-linear scales
    # beside trtllm-gen's (32 × 8 × 8 bytes more for K and for V) and the fp8 workspace
    # (2,048): 36,864 + 4,096 + 2,048 = 43,008; 10 GiB // 43,008 = 249,660 → 249,600
    r = engine_plan("sglang", req("llama-3.1-8b", "nvfp4", "b200", settings=EngineSettings(
        prefill_kv_cache_dequant_dtype="fp8_e4m3")))
    assert r.extra["cell_bytes"] == 43008 and r.kv_tokens == 249600
    assert r.command.endswith("--kv-cache-dtype nvfp4 --prefill-kv-cache-dequant-dtype fp8_e4m3")
    # on SM120 fp8_e4m3 is the default: the same pool as without it
    sm120 = engine_plan("sglang", req("llama-3.1-8b", "nvfp4", "rtx-5090", settings=EngineSettings(
        prefill_kv_cache_dequant_dtype="fp8_e4m3")))
    assert sm120.extra["cell_bytes"] == 38912
    # auto is the card's choice
    auto = engine_plan("sglang", req("llama-3.1-8b", "nvfp4", "b200", settings=EngineSettings(
        prefill_kv_cache_dequant_dtype="auto")))
    assert auto.extra["cell_bytes"] == 36864 and "dequant" not in auto.command


@pytest.mark.parametrize(("kv", "gpu", "prefill", "words"), [
    ("nvfp4", "rtx-5090", "nvfp4", "needs SM100"),
    ("fp8_e4m3", "b200", "fp8_e4m3", "applies only with --kv-cache-dtype nvfp4"),
    ("nvfp4", "b200", "bf16", "takes auto, fp8_e4m3 or nvfp4"),
])
def test_prefill_dequant_dtype_refusals(kv, gpu, prefill, words):
    with pytest.raises(InputError) as e:
        engine_plan("sglang", req("llama-3.1-8b", kv, gpu, settings=EngineSettings(
            prefill_kv_cache_dequant_dtype=prefill)))
    assert e.value.field == "prefill_kv_cache_dequant_dtype" and words in str(e.value)


def test_prefill_dequant_dtype_through_the_command_cli_and_api(capsys):
    from app.cli import main
    from app.web import create_app

    launch = read_command("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
                          "--kv-cache-dtype nvfp4 --prefill-kv-cache-dequant-dtype fp8_e4m3")
    assert launch.settings["prefill_kv_cache_dequant_dtype"] == "fp8_e4m3"
    main(["llama-3.1-8b", "--engine", "sglang", "--kv", "nvfp4", "--gpu", "b200",
          "--prefill-kv-cache-dequant-dtype", "fp8_e4m3", "--json"])
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["engine_report"]["extra"]["cell_bytes"] == 43008
    client = TestClient(create_app())
    got = client.post("/api/v1/plan", json={
        "model": "llama-3.1-8b", "engine": "sglang", "gpu": "b200", "context": 8192,
        "kv": "nvfp4", "prefill_kv_cache_dequant_dtype": "fp8_e4m3"})
    assert got.status_code == 200 and got.json()["engine_report"]["extra"]["cell_bytes"] == 43008
    page = client.get("/", params={"model": "llama-3.1-8b", "engine": "sglang", "gpu": "b200",
                                   "context": "8k", "kv_k": "nvfp4", "kv_v": "nvfp4",
                                   "prefill_kv_cache_dequant_dtype": "fp8_e4m3"})
    assert page.status_code == 200 and "43,008-byte cell" in page.text


@pytest.mark.parametrize(("kv", "gpu", "backend"), [
    ("mxfp8", "b200", "fa4"), ("fp4_mx_block16", "h100", "triton"),
    ("fp4_mx_block16", "h100", "torch_native"), ("fp8_e4m3", "h100", "fa3")])
def test_attention_backend_in_a_pasted_command_is_planned(kv, gpu, backend):
    """--attention-backend in a pasted SGLang command is a setting: planned and passed on."""
    from app.web import create_app

    command = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
               f"--context-length 8192 --kv-cache-dtype {kv} --attention-backend {backend}")
    client = TestClient(create_app())
    got = client.post("/api/v1/command", json={"command": command, "gpu": gpu})
    assert got.status_code == 200, got.text
    assert not [n for n in got.json()["command"]["notes"] if "attention-backend" in n]
    cmd = got.json()["engine_report"]["command"]
    assert cmd.count("--attention-backend") == 1 and f"--attention-backend {backend}" in cmd


@pytest.mark.parametrize(("kv", "gpu", "backend", "says"), [
    ("mxfp8", "b200", "triton", "as fa4 reads it"),
    ("nvfp4", "b200", "flashinfer", "as trtllm_mha reads it"),
    ("fp4_mx16", "h100", "fa3", "as triton or torch_native or flex_attention or trtllm_mha"),
])
def test_block_scaled_cache_beside_a_backend_that_does_not_read_it_is_refused(kv, gpu, backend,
                                                                               says):
    with pytest.raises(InputError, match=says) as err:
        engine_plan("sglang", req("llama-3.1-8b", kv, gpu,
                                  settings=EngineSettings(attention_backend=backend)))
    assert err.value.field == "attention_backend"


def test_fp4_mx_block16_with_trtllm_backends_takes_their_pages():
    r = engine_plan("sglang", req("llama-3.1-8b", "fp4_mx16", "h100",
                                  settings=EngineSettings(attention_backend="trtllm_mha",
                                                          page_size=8)))
    assert r.block_tokens == 64 and r.command.count("--attention-backend trtllm_mha") == 1
    mla = engine_plan("sglang", req("deepseek-v2-lite-chat", "fp4_mx16", "b200",
                                    settings=EngineSettings(attention_backend="trtllm_mla")))
    assert mla.block_tokens == 64
    assert "--attention-backend flashinfer" not in mla.command


def test_phase_backends_are_noted_not_dropped():
    launch = read_command("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
                          "--prefill-attention-backend fa3 --decode-attention-backend flashinfer")
    assert not launch.unknown
    assert [n.split(":")[0] for n in launch.notes[:2]] == ["--prefill-attention-backend fa3",
                                                          "--decode-attention-backend flashinfer"]
