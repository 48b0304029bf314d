"""SGLang 0.5.23 on Gemma-3n, Gemma 4's E series (KV-shared layers), Kimi-K3 and Step-3.7.

Every expected figure is worked by hand from the release's formulas (docs/ENGINES.md §3)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_hf import _gemma3n, _gemma4_e2b

from kvcore import CacheOptions, InputError, find_gpu, load_model, spec_from_config
from kvcore.engines import EngineRequest, engine_plan, sglang
from kvcore.parallel import Parallel

GiB = 1 << 30


def _plan(spec, budget=None, context=32768, sequences=1, gpu=None, tp=1, pp=1):
    gpus = (find_gpu(gpu),) * (tp * pp) if gpu else ()
    return engine_plan("sglang", EngineRequest(
        spec=spec, context=context, sequences=sequences,
        cache=CacheOptions(kv_k="f16", kv_v="f16"), kv_budget_bytes=budget, gpus=gpus,
        parallel=Parallel(tp=tp, pp=pp)))


# --- Gemma-3n: one pool over all layers, the KV-shared ones included ------------------------

@pytest.mark.parametrize(("n_layers", "shared", "tokens"), [
    # E4B: 35 layers × 2 heads × (256 + 256) × 2 B = 71,680 B a token; 4 GiB // 71,680
    (35, 15, 59918),
    # E2B: 30 × 2,048 = 61,440 B; 4 GiB // 61,440
    (30, 10, 69905),
])
def test_gemma3n_pool_has_rows_for_every_layer(n_layers, shared, tokens):
    spec = spec_from_config(_gemma3n(n_layers, shared), name="g3n", source="test")
    r = _plan(spec, budget=4 * GiB)
    # not a hybrid SWA architecture (server_args disables it for Gemma3n): one pool, every
    # layer of max(num_hidden_layers, num_attention_layers) holds every token
    assert r.extra["cell_bytes"] == n_layers * 2 * 512 * 2
    assert r.extra["swa_tokens"] is None
    assert r.kv_tokens == 4 * GiB // (n_layers * 2048) == tokens
    assert r.fits and r.max_sequences == tokens // 32768
    assert any(f"rows for the {shared} KV-shared layers" in n for n in r.notes)


def test_gemma3n_e4b_pool_log_counts_the_shared_layers():
    spec = spec_from_config(_gemma3n(), name="g3n", source="test")
    r = _plan(spec, budget=4 * GiB)
    # K = (59,918 + 1 page) × 35 layers × 2 heads × 256 × 2 B = 2,147,496,960 B = 2.00 GB;
    # had the pool skipped the 15 shared layers: 20 layers, 104,857 tokens
    assert r.log_lines == ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 59918, "
                           "K size: 2.00 GB, V size: 2.00 GB",)
    assert r.command == ("python -m sglang.launch_server --model-path g3n --context-length "
                         "32768 --max-running-requests 1")


def test_gemma3n_tp2_splits_the_two_kv_heads():
    spec = spec_from_config(_gemma3n(), name="g3n", source="test")
    r = _plan(spec, budget=4 * GiB, tp=2)
    # get_num_kv_heads(2) = 1 head a rank: 35 × 1 × 512 × 2 B = 35,840 B a token
    assert r.extra["cell_bytes"] == 35840
    assert r.kv_tokens == 4 * GiB // 35840 == 119837


# --- Gemma 4 E2B: both hybrid SWA pools count the shared layers ------------------------------

def test_gemma4_e2b_swa_pools_count_the_shared_layers():
    spec = spec_from_config(_gemma4_e2b(), name="e2b", source="test")
    r = _plan(spec, budget=4 * GiB)
    # get_hybrid_layer_ids reads layer_types over all 35 layers: 7 full (4, 9, ..., 34), 28
    # sliding. F = 7 × 1 head × (512 + 512) × 2 B = 14,336; S = 28 × 1 × (256 + 256) × 2 B
    # = 28,672. full tokens = int(4 GiB / (14,336 + 0.8 × 28,672)) = int(115,228.6)
    assert r.extra["cell_bytes"] == 14336 + 28672
    assert r.kv_tokens == 115228
    assert r.extra["swa_tokens"] == int(115228 * 0.8) == 92182
    # window pool K: 92,183 × 28 × 256 × 2 B = 1.23 GB; full pool K: 115,229 × 7 × 512 × 2 B
    # = 0.77 GB; both pools: 92,183 × 28,672 + 115,229 × 14,336 = 4,294,993,920 B = 4.00 GB
    assert r.log_lines == (
        "Use sliding window memory pool. full_layer_tokens=115228, swa_layer_tokens=92182",
        "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 115228, K size: 0.77 GB, "
        "V size: 0.77 GB",
        "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 92182, K size: 1.23 GB, "
        "V size: 1.23 GB",
        "SWAKVPool mem usage: 4.00 GB, swa size: 92182, full size: 115228")
    assert any("rows for the 20 KV-shared layers" in n for n in r.notes)


def test_kv_shared_sources_name_the_last_owner_of_each_kind():
    spec = spec_from_config(_gemma4_e2b(), name="e2b", source="test")
    # layers 15..34 share; the last owners are 14 (full) and 13 (sliding)
    src = dict(spec.kv_shared_sources)
    assert sorted(src) == list(range(15, 35))
    assert src[19] == src[34] == 14 and src[15] == src[33] == 13
    # the spec itself still keeps no cache for them (vLLM and llama.cpp skip them)
    assert spec.kv_shared_layers == 20
    assert sum(g.count for g in spec.groups) == 15


# --- Kimi-K3: MLA + KDA, extra_buffer state slots --------------------------------------------

def test_kimi_k3_state_slots_and_mla_pool():
    r = _plan(load_model("kimi-k3"), budget=20 * GiB, context=65536, sequences=4, tp=8)
    # a rank's KDA state a layer: 12 of 96 heads × 128 × 128 × 4 B (float32 SSM) + conv
    # 3 × (3 × 12 × 128) × 2 B = 814,080; 69 layers: 56,171,520 B a slot
    per_req = 69 * (12 * 128 * 128 * 4 + 3 * 3 * 12 * 128 * 2)
    assert per_req == 56171520
    # slots = int((20 GiB × 0.9 / 1.9 − per_req) // per_req) = int(180.09) = 180
    assert r.extra["mamba_slots"] == 180
    # KV: 20 GiB − 181 slots = 11,307,791,360 B over 24 MLA layers × 576 × 2 B = 27,648
    assert r.extra["cell_bytes"] == 27648
    assert r.kv_tokens == (20 * GiB - 181 * per_req) // 27648 == 408991
    # 5 slots a running request (KimiK3ForConditionalGeneration is on _MAMBA_EXTRA_BUFFER_ARCHS)
    assert any("max_running_requests ≤ 36 (5 slots a request)" in n for n in r.notes)
    assert r.max_sequences == min(408991 // 65536, 180 // 5) == 6
    # (408,991 + 1) × 27,648 B = 10.53 GB
    # the state pool first: 181 slots of conv states in bfloat16 (69 × 3 × 3 × 12 × 128 × 2 B
    # = 0.32 GiB) and SSM states in float32 (69 × 12 × 128 × 128 × 4 B = 9.15 GiB)
    conv = 181 * 69 * 3 * 3 * 12 * 128 * 2 / GiB
    ssm = 181 * 69 * 12 * 128 * 128 * 4 / GiB
    assert r.log_lines == (
        f"Mamba Cache is allocated. max_mamba_cache_size: 180, conv_state size: {conv:.2f}GB, "
        f"ssm_state size: {ssm:.2f}GB",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 408991, KV size: 10.53 GB")


def test_kimi_k3_is_served_multimodal_with_its_vt_vision_depth():
    spec = load_model("kimi-k3")
    # KimiK3VisionConfig aliases vt_num_hidden_layers 27 and vt_hidden_size 1024
    assert spec.vision_encoder == (27, 1024)
    assert sglang.is_multimodal(spec)
    # 0.95 × (1 − 0.1 × (27 × 1024² / (24 × 1024²) − 1)) = 0.95 × 0.9875
    assert sglang.vision_factor(27, 1024) == pytest.approx(0.938125)
    r = _plan(spec, context=65536, gpu="h200", tp=8)
    # H200 143,771 MiB, tp 8, one running request, no prefill graph (KDA): reserved
    # 512 + 8,192 × 1.5 + 8 / 8 × 1,024 + 2 × 1 = 13,826 MiB; round(129,945 / 143,771, 3)
    # = 0.904; × 0.938125
    assert r.extra["mem_fraction_static"] == pytest.approx(0.904 * 0.938125)


def test_kimi_k3_text_only_architecture_is_still_refused():
    path = Path(__file__).parents[1] / "kvcore" / "data" / "models" / "kimi-k3.json"
    config = json.loads(path.read_text())
    config["architectures"] = ["KimiK3LinearForCausalLM"]
    spec = spec_from_config(config, name="t", source="test")
    with pytest.raises(InputError, match="KDA state slots .*KimiK3LinearForCausalLM") as err:
        _plan(spec, budget=20 * GiB, tp=8)
    assert err.value.field == "engine"


# --- Step-3.7-Flash: the config's architecture is registered nowhere -------------------------

def test_step37_flash_architecture_is_not_registered():
    with pytest.raises(InputError, match="SGLang does not run Step3p7FlashForCausalLM: "
                       "models/step3p7.py registers Step3p7ForConditionalGeneration only") as e:
        _plan(load_model("step-3.7-flash"), budget=20 * GiB)
    assert e.value.field == "engine"
    assert "resolve_transformers_arch" in str(e.value)


def test_step37_vlm_architecture_keeps_the_layout_refusal():
    path = Path(__file__).parents[1] / "kvcore" / "data" / "models" / "step-3.7-flash.json"
    config = json.loads(path.read_text())
    config["architectures"] = ["Step3p7ForConditionalGeneration"]
    spec = spec_from_config(config, name="t", source="test")
    with pytest.raises(InputError, match="could not establish Step-3.7's decoder geometry"):
        _plan(spec, budget=20 * GiB)


# --- what the pools log: the state pool's line, the KV pools' dtype ----------------------------

def test_qwen35_state_pool_line_splits_conv_and_ssm_states():
    # Qwen3.5-27B: 48 Gated DeltaNet layers, a slot 48 × 3 × 10,240 conv values × 2 B =
    # 2,949,120 and 48 × 48 × 128 × 128 SSM values × 4 B = 150,994,944. The state share of
    # 40 GiB (× 0.9 / 1.9) less a padding slot holds int(131.2) = 131 slots; the pool keeps
    # 132: 389,283,840 B = 0.36 GiB of conv and 19,931,332,608 B = 18.56 GiB of SSM states
    r = _plan(load_model("qwen3.5-27b"), budget=40 * GiB, context=8192)
    per_req = 2_949_120 + 150_994_944
    slots = int((40 * GiB * 0.9 / 1.9 - per_req) // per_req)
    assert slots == r.extra["mamba_slots"] == 131
    assert r.log_lines[0] == ("Mamba Cache is allocated. max_mamba_cache_size: 131, "
                              "conv_state size: 0.36GB, ssm_state size: 18.56GB")
    # the KV pool gets what the 132 slots leave: 16 full layers × 4 heads × 512 × 2 B a token
    assert r.kv_tokens == (40 * GiB - 132 * per_req) // 65536
    assert r.log_lines[1].startswith(f"KV Cache is allocated. dtype: torch.bfloat16, "
                                     f"#tokens: {r.kv_tokens}, K size: ")


def _with_dtype(model, **fields):
    config = json.loads((Path(__file__).parents[1] / "kvcore" / "data" / "models"
                         / f"{model}.json").read_text())
    for key in ("torch_dtype", "dtype"):
        config.pop(key, None)
    config.update(fields)
    return spec_from_config(config, name=model, source="test")


@pytest.mark.parametrize(("model", "fields", "dtype"), [
    # the config's own 16-bit dtype, under either key
    ("llama-3.1-8b", {"torch_dtype": "bfloat16"}, "bfloat16"),
    ("llama-3.1-8b", {"dtype": "float16"}, "float16"),
    # float32, or no dtype at all (_get_and_verify_dtype's float32): auto serves float16 ...
    ("llama-3.1-8b", {"torch_dtype": "float32"}, "float16"),
    ("llama-3.1-8b", {}, "float16"),
    # ... and bfloat16 for Gemma's model types
    ("gemma-2-9b", {"torch_dtype": "float32"}, "bfloat16"),
])
def test_sglang_pool_dtype_follows_the_served_model_dtype(model, fields, dtype):
    r = _plan(_with_dtype(model, **fields), budget=4 * GiB, context=4096)
    assert r.log_lines[-1].startswith(f"KV Cache is allocated. dtype: torch.{dtype}, #tokens: ")


def test_sglang_pool_dtype_of_named_formats_and_special_cases():
    assert sglang.pool_dtype(load_model("llama-3.1-8b"), "fp8_e5m2") == "torch.float8_e5m2"
    assert sglang.pool_dtype(load_model("llama-3.1-8b"), "fp8_e4m3") == "torch.float8_e4m3fn"
    # gpt-oss names no dtype; its MXFP4 checkpoint is served in bfloat16 (model_overrides)
    assert load_model("gpt-oss-20b").config_dtype == ""
    assert sglang.pool_dtype(load_model("gpt-oss-20b"), "auto") == "torch.bfloat16"
    # LongCat-Flash names none either: float16
    assert sglang.pool_dtype(load_model("longcat-flash-chat"), "auto") == "torch.float16"
    # a nested text config without a dtype takes the outer config's (get_hf_text_config):
    # Devstral-Small-2's text_config names none, its outer config bfloat16
    assert load_model("devstral-small-2-24b-instruct").config_dtype == "bfloat16"
    # SGLang's own LLaVA *ForCausalLM classes are served in float16
    spec = replace(load_model("llama-3.1-8b"), architecture="LlavaLlamaForCausalLM")
    assert sglang.pool_dtype(spec, "auto") == "torch.float16"
