"""SGLang 0.5.23's start-up refusals: the checks that stop a launch while the pools are sized,
each with figures worked from the source's formulas (kvcore/engines/sglang.py, docs/ENGINES.md
S1/S2)."""

import json
import math

import pytest

from kvcore import CacheOptions, find_gpu, load_model
from kvcore.engines import EngineRequest, EngineSettings, engine_plan

GiB = 1024**3
MiB = 1024**2
#: kvcore.engines.sglang.PRELOAD: CUDA context and NCCL before the weights load
PRELOAD = int(0.86 * GiB)


def req(model, ctx=16, seqs=1, **kw):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k="f16", kv_v="f16"), **kw)


# gpt-oss-20b: 12 full and 12 sliding layers × 8 KV heads × (64 + 64) × 2 B = 24,576 bytes a
# token each; HybridSWAPoolConfigurator: full tokens = int(budget / (F + 0.8 × S)), window
# tokens = int(full × 0.8); gpt_oss.py get_attention_sliding_window_size = 128 − 1
GPT_OSS_CELL = 24576 + 0.8 * 24576


def test_window_pool_at_its_admission_floor_refuses_to_start():
    # 161 full tokens: int(161 × 0.8) = 128 window tokens, and 127 + 1 >= 128
    budget = math.floor(162 * GPT_OSS_CELL) - 1
    assert int(budget / GPT_OSS_CELL) == 161
    r = engine_plan("sglang", req("gpt-oss-20b", kv_budget_bytes=budget))
    assert not r.fits and r.max_context == 0 and r.max_sequences == 0
    assert r.log_lines == (
        "ValueError: SWA pool (128 tokens) cannot hold even one request: the prefill admission "
        "floor is sliding_window_size (127) + page_size (1). Increase --swa-full-tokens-ratio "
        "or the total KV budget.",)
    assert r.refusal.startswith("SWA pool (128 tokens) cannot hold even one request")


def test_window_pool_one_token_past_the_floor_starts():
    # 162 full tokens: int(162 × 0.8) = 129 window tokens > 127 + 1
    budget = math.ceil(162 * GPT_OSS_CELL)
    r = engine_plan("sglang", req("gpt-oss-20b", kv_budget_bytes=budget))
    assert r.fits and not r.refusal and r.extra["swa_tokens"] == 129
    assert r.log_lines[0] == "Use sliding window memory pool. full_layer_tokens=162, " \
                             "swa_layer_tokens=129"
    assert r.max_context == 162


def test_laguna_window_is_the_configs_sliding_window():
    # Laguna-XS.2: 10 full and 30 sliding layers × 8 KV heads × (128 + 128) × 2 B; laguna.py
    # has no get_attention_sliding_window_size, so the check takes the config's 512 itself:
    # 642 full tokens leave int(642 × 0.8) = 513 = 512 + 1 window tokens (refused), 643 leave 514
    cell = 10 * 8 * 256 * 2 + 0.8 * 30 * 8 * 256 * 2
    refused = engine_plan("sglang", req("laguna-xs.2", kv_budget_bytes=642 * int(cell)))
    assert not refused.fits
    assert refused.log_lines[0].startswith(
        "ValueError: SWA pool (513 tokens) cannot hold even one request: the prefill admission "
        "floor is sliding_window_size (512) + page_size (1).")
    started = engine_plan("sglang", req("laguna-xs.2", kv_budget_bytes=643 * int(cell)))
    assert started.fits and started.extra["swa_tokens"] == 514


def test_page_size_raises_the_floor():
    # --page-size 64: full and window tokens round down to the page, the floor is 127 + 64;
    # 256 full tokens leave int(256 × 0.8) // 64 × 64 = 192 window tokens > 191
    settings = EngineSettings(page_size=64)
    ok = engine_plan("sglang", req("gpt-oss-20b", kv_budget_bytes=math.ceil(256 * GPT_OSS_CELL),
                                   settings=settings))
    assert ok.fits and ok.extra["swa_tokens"] == 192
    # 255 → 192 full tokens → int(153.6) // 64 × 64 = 128 window tokens <= 191
    low = engine_plan("sglang", req("gpt-oss-20b", kv_budget_bytes=math.ceil(255 * GPT_OSS_CELL),
                                    settings=settings))
    assert not low.fits
    assert "SWA pool (128 tokens)" in low.log_lines[0] and "page_size (64)" in low.log_lines[0]


def test_an_empty_pool_is_not_enough_memory():
    # Qwen3-8B: 36 layers × 8 KV heads × (128 + 128) × 2 B = 147,456 bytes a token; a budget
    # of one byte less holds none (MemoryPoolConfig.__post_init__)
    r = engine_plan("sglang", req("qwen3-8b", kv_budget_bytes=147455))
    assert r.kv_tokens == 0 and not r.fits
    assert r.log_lines == ("RuntimeError: Not enough memory. Please try to increase "
                           "--mem-fraction-static.",)
    one = engine_plan("sglang", req("qwen3-8b", ctx=1, kv_budget_bytes=147456))
    assert one.kv_tokens == 1 and one.fits


def test_weights_past_the_fraction_refuse_with_the_minimum_fraction():
    # _profile_available_bytes: rest = free after loading − free before × (1 − fraction) <= 0
    # raises, naming 1 − after / before (here weights / before) and its ceiling to 0.001
    gpu = find_gpu("rtx4090")
    before = gpu.total_bytes - PRELOAD
    weights = 16 * GiB
    r = engine_plan("sglang", req("qwen3-8b", gpus=(gpu,), weights_bytes=weights,
                                  settings=EngineSettings(mem_fraction_static=0.6)))
    least = weights / before
    assert before * 0.6 < weights < before
    assert r.log_lines == (
        "mem_fraction_static=0.6",
        f"ValueError: Loaded weights leave no GPU memory for the KV cache under "
        f"--mem-fraction-static=0.6. Raise --mem-fraction-static above "
        f"{math.ceil(least * 1000) / 1000:.3f} (minimum viable = 1 - available/pre = "
        f"{least:.4f}). If using speculative decoding, draft weights are now counted.")
    assert not r.fits and r.max_context == 0


def _qwen35_state() -> int:
    g = next(g for g in load_model("qwen3.5-27b").groups if g.kind == "linear")
    return g.count * (g.conv_state_values * 2 + (g.state_values - g.conv_state_values) * 4)


def test_mamba_pool_without_a_slot_refuses():
    # _handle_max_mamba_cache: int((rest × 0.9 / 1.9 − per_req) // per_req) <= 0 raises
    per_req = _qwen35_state()
    rest = 100 * MiB
    slots = math.floor((rest * 0.9 / 1.9 - per_req) / per_req)
    assert slots == -1
    r = engine_plan("sglang", req("qwen3.5-27b", kv_budget_bytes=rest))
    assert r.log_lines == (
        f"RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
        f"Computed max_mamba_cache_size=-1 (total_rest_memory={rest / GiB:.2f} GB, "
        f"mamba_cache_per_req={per_req / MiB:.2f} MB). Try: (1) reduce --max-running-requests, "
        f"(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or (4) "
        f"use GPUs with more memory.",)
    assert not r.fits


def test_mamba_slots_short_of_one_request_refuse():
    # 3 slots (the Mamba share holds 4 × per_req, one of them the padding slot) serve
    # 3 // 5 = 0 requests (extra_buffer: 5 slots a request): resolve_max_num_reqs raises
    per_req = _qwen35_state()
    rest = math.ceil(4 * per_req * 1.9 / 0.9) + 1
    r = engine_plan("sglang", req("qwen3.5-27b", kv_budget_bytes=rest))
    assert r.extra["mamba_slots"] == 3 and r.kv_tokens > 0
    assert r.log_lines[0].startswith(
        "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any "
        "requests. max_mamba_cache_size=3, mamba_ratio=5, resulting max_num_reqs=0.")
    assert not r.fits and r.max_sequences == 0


def test_mamba_cap_below_the_running_requests_is_warned():
    # Nemotron-H 56B at 40 GiB: 21 slots, 21 // 5 = 4 requests; five asked for
    r = engine_plan("sglang", req("nemotron-h-56b-base-8k", ctx=8192, seqs=5,
                                  kv_budget_bytes=40 * GiB))
    assert r.log_lines[0] == (
        "max_running_requests is capped to 4 by the mamba state cache (max_mamba_cache_size=21, "
        "5 state slots per request). To raise it: increase --mamba-full-memory-ratio or "
        "--max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16.")
    assert not r.fits and not r.refusal and r.max_sequences == 4


def test_pool_shorter_than_the_context_is_warned():
    # tp_worker get_worker_info: 100 tokens of Qwen3-8B against --context-length 200
    r = engine_plan("sglang", req("qwen3-8b", ctx=200, kv_budget_bytes=100 * 147456))
    assert r.kv_tokens == 100 and not r.fits and not r.refusal
    assert r.log_lines[-1].startswith("KV pool holds 100 tokens, fewer than --context-length "
                                      "200. One full-length request cannot fit")


def test_cli_names_the_refusal_as_the_binding(capsys):
    from app.cli import main

    # Qwen3-8B in 16 bits fits a 24 GB card, but not under --mem-fraction-static 0.5
    main(["qwen3-8b", "--ctx", "4096", "--gpu", "rtx4090", "--engine", "sglang",
          "--mem-fraction-static", "0.5", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["binding"] == "weights"
    assert data["binding_reason"].startswith(
        "sglang refuses to start: Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.5")


@pytest.mark.parametrize("model", ["gpt-oss-20b", "laguna-xs.2", "qwen3-8b", "qwen3.5-27b"])
def test_plans_on_a_card_start(model):
    r = engine_plan("sglang", req(model, ctx=8192, gpus=(find_gpu("h200"),)))
    assert r.fits and not r.refusal and not any("Error" in line for line in r.log_lines)


# --- the float32 router (models/laguna.py LagunaMoEGate, models/glm4_moe.py Glm4MoeGate) ---

def test_laguna_router_is_float32_under_sglang():
    from kvcore.weights import weights_for

    # Laguna-S.2.1: 47 MoE layers (layer 0 dense) × (256 experts × 3,072 + 256 bias) values,
    # which the checkpoint keeps in bf16 (its quantization ignores mlp.gate) and SGLang holds
    # in float32: 2 bytes more a value, about 74 MB
    spec = load_model("laguna-s-2.1")
    extra = 47 * (256 * 3072 + 256) * 2
    assert extra == 73_948_672
    r = engine_plan("sglang", req("laguna-s-2.1", ctx=8192, gpus=(find_gpu("h200"),)))
    assert r.weights_bytes == weights_for(spec).bytes + extra
    assert any("MoE router in float32" in n for n in r.notes)
    # vLLM's Laguna router is not priced so: the engine's weights are the estimate's
    assert engine_plan("vllm", req("laguna-s-2.1", ctx=8192, gpus=(find_gpu("h200"),))
                       ).weights_bytes == weights_for(spec).bytes


def test_router_bytes_by_stage_and_format():
    from kvcore.engines.sglang import router_fp32_bytes
    from kvcore.parallel import Parallel

    # Laguna-XS.2: 40 layers, layer 0 dense, 256 experts × 2,048; --pp 2 gives SGLang's
    # stages layers 0-19 (19 MoE layers) and 20-39 (20)
    row = 256 * 2048 + 256
    two = req("laguna-xs.2", parallel=Parallel(pp=2))
    assert router_fp32_bytes(two, 0) == 19 * row * 2
    assert router_fp32_bytes(two, 1) == 20 * row * 2
    # --weights fp8 prices the router at 8 + 32 / 128² bits a value; SGLang still holds 4 bytes
    fp8 = req("laguna-xs.2", weights="fp8")
    assert router_fp32_bytes(fp8, 0) == 4 * 39 * row - int(39 * row * (8 + 32 / 128**2) / 8)
    # weights given as the engine printed them already hold it
    assert router_fp32_bytes(req("laguna-xs.2", weights_bytes=30 * GiB), 0) == 0


def test_glm45_router_is_float32_and_deepseeks_is_not():
    from kvcore.engines.sglang import router_fp32_bytes

    # GLM-4.5: 92 layers, the first 3 dense: 89 × 160 experts × 5,120, bf16 in the checkpoint
    assert router_fp32_bytes(req("glm-4.5"), 0) == 89 * 160 * 5120 * 2
    # DeepSeek's MoEGate keeps the gate in the model dtype (no router_fp32 in the config)
    assert router_fp32_bytes(req("deepseek-v3"), 0) == 0
    assert router_fp32_bytes(req("qwen3-30b-a3b"), 0) == 0


def test_speculative_tokens_are_refused_in_one_line(capsys):
    from app.cli import main
    from kvcore import InputError

    with pytest.raises(InputError, match="speculative decoding"):
        engine_plan("sglang", req("qwen3.5-27b", kv_budget_bytes=40 * GiB,
                                  settings=EngineSettings(speculative_tokens=3)))
    # the command line stops it sooner: SGLang reads --speculative-tokens with a draft only
    code = main(["qwen3.5-27b", "--gpu", "h200", "--engine", "sglang",
                 "--speculative-tokens", "3"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("speculative_tokens is SGLang's draft tokens with --mtp or "
                              "--draft") in err[0]
