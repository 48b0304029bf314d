"""Engine profiles: paging, padding, sharding and reporting rules, each checked by hand."""

import math
from dataclasses import replace

import pytest
from test_hf import _ernie45_21b, _gemma3n, _gemma4_e2b, _hunyuan_large, _lfm2_8b

from kvcore import (
    CacheOptions,
    InputError,
    find_gpu,
    get_format,
    gpu_catalog,
    load_model,
    spec_from_config,
)
from kvcore.command import read_command, resolve
from kvcore.engines import (
    ENGINE_TITLES,
    EngineRequest,
    EngineSettings,
    UnsupportedFormat,
    engine_plan,
    llamacpp,
    sglang,
    vllm,
)
from kvcore.gpus import memory_variants
from kvcore.model import LayerKind
from kvcore.parallel import Parallel, pp_layer_counts, rank_spec
from kvcore.query import Query, check_engine, check_settings, find_format, find_gpu_for
from kvcore.units import format_bytes
from kvcore.weights import weights_for

GiB, MiB = 2**30, 2**20
F16 = get_format("f16")


def req(model, ctx=8192, seqs=1, kv="f16", gpu="h100", **kw):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k=kv, kv_v=kv),
                         gpus=(find_gpu(gpu),) if gpu else (), **kw)


# --- vLLM ---------------------------------------------------------------------------------

def test_vllm_data_parallel_splits_the_routed_experts():
    # --data-parallel-size 2: two engines, each with its own cache, and FusedMoE's TP group
    # flattened across them (fused_moe/config.py FusedMoEParallelConfig.make): a rank holds
    # half of Qwen3-30B-A3B's routed experts and all of the rest (tp 1)
    from kvcore.engines.base import loaded_weights
    from kvcore.engines.lora import LoRA
    from kvcore.engines.vllm_lora import lora_split
    from kvcore.engines.vllm_offload import _layer_params

    one = engine_plan("vllm", req("qwen3-30b-a3b", ctx=32768))
    w = loaded_weights(req("qwen3-30b-a3b"))
    assert w.expert_bytes > 0 and one.weights_bytes == w.bytes
    two = engine_plan("vllm", req("qwen3-30b-a3b", ctx=32768, parallel=Parallel(dp=2)))
    assert two.weights_bytes == w.bytes - w.expert_bytes + w.expert_bytes // 2
    # the weights freed go to each engine's cache
    assert two.kv_tokens > 2 * one.kv_tokens and "--data-parallel-size 2" in two.command
    # a dense model's replicas keep all of it
    dense = engine_plan("vllm", req("llama-3.1-8b", parallel=Parallel(dp=2)))
    assert dense.weights_bytes == engine_plan("vllm", req("llama-3.1-8b")).weights_bytes
    # the decode estimate: a card reads its half of the experts all 2 × 4 sequences' tokens
    # route to, and the rest of the active weights and its engine's cache
    from kvcore.query import Query, answer
    q = Query(spec=load_model("qwen3-30b-a3b"), context=32768, sequences=4,
              cache=CacheOptions(kv_k="f16", kv_v="f16"), gpus=(find_gpu("h100"),),
              engine="vllm")
    alone = answer(q)["decode"]
    cache = alone["bytes_per_step"] - w.step_bytes(4)
    d = answer(replace(q, parallel=Parallel(dp=2)))["decode"]
    assert d["expert_sequences"] == 8 and d["expert_share"] == w.expert_share(8)
    dense = w.active_bytes - w.active_expert_bytes
    assert d["bytes_per_step"] == dense + (w.step_bytes(8) - dense) // 2 + cache
    # the experts' LoRA slots and the offloaded parameters split the same way
    spec = load_model("qwen3-30b-a3b")
    lora = LoRA(rank=16)
    assert (lora_split(spec, lora, Parallel(dp=2))[1]
            == lora_split(spec, lora, Parallel(tp=2))[1])
    whole, half = _layer_params(spec, w, 1), _layer_params(spec, w, 1, 2)
    assert [b // 2 for b, e in whole[5] if e] == [b for b, e in half[5] if e]
    assert [b for b, e in whole[5] if not e] == [b for b, e in half[5] if not e]


def test_vllm_dense_blocks_and_report():
    # Llama-3.1-8B: a block of 16 tokens × 32 layers × 8 heads × 256 values × 2 B = 2 MiB
    pool = vllm.pool(load_model("llama-3.1-8b"), 10 * GiB, F16, F16, 16)
    assert pool.num_blocks == 10 * GiB // (16 * 32 * 8 * 256 * 2)
    assert pool.reported_tokens(32768, 8192, 0) == pool.num_blocks * 16
    assert pool.concurrency(32768, 8192, 0) == pool.num_blocks / 2048


def test_vllm_sliding_window_reserves_window_plus_batch():
    pool = vllm.pool(load_model("gpt-oss-20b"), 4 * GiB, F16, F16, 16)
    # 12 full + 12 sliding layers: two groups of 12 sharing one page size
    assert pool.group_size == 12 and len(pool.groups) == 2
    page = 16 * 8 * 128 * 2
    assert pool.num_blocks == 4 * GiB // page // 12
    need = -(-131072 // 16) + (-(-min(128 - 1 + 8192, 131072) // 16) + 1)
    assert pool.blocks_per_request(131072, 8192, 0) == need
    # a smaller batch reserves fewer sliding pages per request
    assert pool.blocks_per_request(131072, 1024, 0) < need


def test_vllm_hybrid_block_holds_a_state_page():
    spec = rank_spec(load_model("qwen3.5-27b"), Parallel(tp=2))
    pool = vllm.pool(spec, 5 * GiB, get_format("fp8"), get_format("fp8"), 16)
    attn_per_token = 2 * 512 * 1  # 2 KV heads per rank × (256 + 256) × 1 byte
    state = next(g for g in spec.groups if g.kind == "linear")
    state_page = state.conv_state_values * 2 + (state.state_values - state.conv_state_values) * 4
    assert pool.min_block % 16 == 0
    assert pool.min_block * attn_per_token >= state_page
    assert (pool.min_block - 16) * attn_per_token < state_page
    # one attention group + 3 linear groups of 16 layers
    assert pool.group_size == 16 and len(pool.groups) == 4


def test_vllm_tp_replicates_heads_beyond_kv_count():
    spec = load_model("qwen3-8b")  # 8 KV heads
    tp16 = rank_spec(spec, Parallel(tp=16))
    assert tp16.groups[0].n_kv_heads == 1
    # 16 ranks × 1 head = twice the cache of 8 heads in total
    tp8 = rank_spec(spec, Parallel(tp=8))
    assert tp8.groups[0].n_kv_heads == 1


@pytest.mark.parametrize(("model", "tp", "why", "best"), [
    ("qwen3-8b", 3, "32 attention heads", 2),        # 32 heads, 8 KV heads
    ("qwen2.5-7b", 8, "28 attention heads", 4),      # 28 heads, 4 KV heads
    ("qwen2.5-7b", 7, "4 KV heads", 4),              # 7 divides 28 but not the 4 KV heads
    ("nemotron-h-56b-base-8k", 16, "8 heads", 8),    # 64 heads, 8 KV heads, 8 Mamba groups
])
def test_tp_that_does_not_split_the_heads_is_refused(model, tp, why, best):
    with pytest.raises(InputError, match=why) as err:
        rank_spec(load_model(model), Parallel(tp=tp))
    assert err.value.field == "tp"
    assert str(err.value).endswith(f"the largest tp below {tp} that works is {best}")
    rank_spec(load_model(model), Parallel(tp=best))
    # the engines refuse it the same way, rather than rounding the heads
    with pytest.raises(InputError):
        engine_plan("vllm", EngineRequest(spec=load_model(model), context=4096,
                                          gpus=(find_gpu("h100"),), parallel=Parallel(tp=tp)))


def test_recurrent_state_splits_exactly_over_tp():
    spec = load_model("qwen3.5-27b")  # GatedDeltaNet: 16 key heads, 48 value heads
    linear = next(g for g in spec.groups if g.kind.is_recurrent)
    assert linear.split_counts == (16, 48)
    shard = next(g for g in rank_spec(spec, Parallel(tp=8)).groups if g.kind.is_recurrent)
    assert shard.state_values * 8 == linear.state_values
    assert shard.conv_state_values * 8 == linear.conv_state_values


def test_mla_latent_is_replicated_on_every_tp_rank():
    spec = load_model("deepseek-v3")
    for tp in (1, 8):
        g = rank_spec(spec, Parallel(tp=tp)).groups[0]
        assert (g.n_kv_heads, g.head_dim_k) == (1, 576)


def test_tp_ranks_hold_the_mla_down_projections_router_and_norms_whole():
    # vLLM builds DeepSeek's fused q_a/kv_a projection with disable_tp (kv_a_proj_with_mqa as a
    # ReplicatedLinear without q_lora_rank) and the MoE gate as a ReplicatedLinear: every TP
    # rank holds them whole, only the rest is split
    from kvcore.engines.base import shares
    from kvcore.weights import weights_for
    spec = load_model("deepseek-v3")
    layer = 7168 * (1536 + 512 + 64) + 1536 + 512 + 2 * 7168
    assert spec.params.replicated == 61 * layer + 58 * 7168 * 256  # 58 MoE layers route
    w = weights_for(spec, "bf16")
    assert w.replicated_bytes == 2 * spec.params.replicated
    r = req("deepseek-v3", gpu="h200", weights="bf16", parallel=Parallel(tp=8))
    assert shares(r, w)[0].weights_bytes == (w.bytes - w.replicated_bytes) // 8 + w.replicated_bytes
    # no q_lora_rank (DeepSeek-V2-Lite): kv_a alone is replicated
    lite = load_model("deepseek-v2-lite-chat")
    assert lite.params.replicated == 27 * (2048 * (512 + 64) + 512 + 2 * 2048) + 26 * 2048 * 64
    # one rank holds everything: nothing to add
    one = req("deepseek-v3", gpu="h200", weights="bf16")
    assert shares(one, w)[0].weights_bytes == w.bytes


def test_pp_tightest_stage_binds():
    assert pp_layer_counts(61, 4) == [15, 15, 16, 15]
    spec = load_model("deepseek-v3")
    r = engine_plan("raw", EngineRequest(spec=spec, context=32768, weights="fp8",
                                         gpus=(find_gpu("h200"),), parallel=Parallel(tp=2, pp=4)))
    assert r.binding_stage == 2  # the stage with 16 layers


def test_sglang_and_trtllm_split_layers_their_own_way():
    # SGLang gives the remainder to the last stages (distributed/utils.py get_pp_indices),
    # TensorRT-LLM to the first (mapping.py Mapping.pp_layers, a torch.tensor_split)
    from kvcore.engines import stage_split
    from kvcore.parallel import sglang_stage_layers, trtllm_stage_layers
    assert [len(sglang_stage_layers(61, 4, s)) for s in range(4)] == [15, 15, 15, 16]
    assert list(sglang_stage_layers(61, 4, 3)) == list(range(45, 61))
    assert [len(trtllm_stage_layers(61, 4, s)) for s in range(4)] == [16, 15, 15, 15]
    assert list(trtllm_stage_layers(61, 4, 1)) == list(range(16, 31))
    assert stage_split("sglang") is sglang_stage_layers
    assert stage_split("trtllm") is trtllm_stage_layers


@pytest.mark.parametrize("engine,stage", [("sglang", 3), ("trtllm", 0)])
def test_pp_pool_is_sized_by_the_stage_with_most_kv_layers(engine, stage):
    # DeepSeek-V3 over 4 stages: the 16-layer stage holds the most latent per token and so the
    # fewest tokens of a given budget; both engines keep the smallest pool of all ranks
    r = engine_plan(engine, req("deepseek-v3", gpu=None, kv_budget_bytes=8 * GiB,
                                parallel=Parallel(tp=4, pp=4)))
    tokens = 8 * GiB // (16 * 576 * 2)
    if engine == "trtllm":
        tokens = -(-tokens // 32) * 32
    assert r.kv_tokens == tokens
    assert r.binding_stage == stage


def granule_bounded(r, per_block, segments):
    """Whether a plan's blocks are the whole blocks of its pool bytes less at most a 2 MiB
    granule's rounding for each of ``segments`` regions."""
    most = r.kv_pool_bytes // per_block
    return most >= r.blocks >= (r.kv_pool_bytes - segments * (2 << 20)) // per_block


def committed(r, page, layers):
    """The blocks vLLM 0.34's extensible KV cache commits in a plan's pool bytes: ``layers``
    regions of ``page`` bytes a block, each in whole 2 MiB granules."""
    blocks = vllm.blocks_within(r.kv_pool_bytes, page * layers, [page] * layers)
    assert (r.kv_pool_bytes - layers * (2 << 20)) // (page * layers) <= blocks
    assert blocks <= r.kv_pool_bytes // (page * layers)
    return blocks


@pytest.mark.parametrize("gpu,kv,block", [
    ("h200", "f16", 64),    # FLASH_ATTN_MLA takes multiples of 16: the default 64
    ("h200", "fp8", 64),    # FLASH_ATTN_MLA has no fp8 cache: FLASHMLA, 64 only
    ("b200", "f16", 64),    # FLASHINFER_MLA: 32 or 64 (0.33's 16 was not, so it took 32)
    ("b200", "fp8", 64),
    ("rtx-5090", "f16", 64),  # SM120: TRITON_MLA
    ("a100", "f16", 64),
])
def test_vllm_mla_block_is_the_backends_choice(gpu, kv, block):
    spec = load_model("deepseek-v3")
    assert vllm.default_block(spec, find_gpu(gpu), get_format(kv)) == block
    # a dense model takes vLLM 0.34's default 64 on every card
    assert vllm.default_block(load_model("llama-3.1-8b"), find_gpu(gpu), get_format(kv)) == 64


def test_vllm_mla_fp8_on_hopper_pages_64_tokens():
    # DeepSeek-V3 fp8 over 8 H200s, 10,000-token requests: blocks of 64 × 61 layers × 576 B;
    # a request holds cdiv(10000, 64) = 157 blocks (10,048 tokens), not 625 blocks of 16
    r = engine_plan("vllm", req("deepseek-v3", ctx=10000, kv="fp8", gpu="h200",
                                weights="fp8", parallel=Parallel(tp=8)))
    assert r.block_tokens == 64
    assert r.blocks == committed(r, 64 * 576, 61)
    assert r.max_concurrency == r.blocks / 157
    assert r.log_lines[-2] == (f"GPU KV cache size: {int(r.blocks / 157 * 10000):,} tokens, "
                               f"Maximum concurrency for 10,000 tokens per request: "
                               f"{r.blocks / 157:.2f}x")
    assert r.log_lines[-1].startswith(f"Extended KV cache to {r.blocks} blocks (")
    # --block-size wins
    r16 = engine_plan("vllm", req("deepseek-v3", ctx=10000, kv="fp8", gpu="h200", weights="fp8",
                                  parallel=Parallel(tp=8),
                                  settings=EngineSettings(block_size=16)))
    assert r16.block_tokens == 16 and r16.blocks == committed(r16, 16 * 576, 61)


def test_vllm_log_lines_and_command():
    # vLLM 0.34.0: gpu_worker.py logs format_gib(the reservation) (str(round(x, 2))), the
    # extensible KV cache commits what fits after warmup, then
    # kv_cache_utils.update_kv_cache_capacity one line; a Llama-3.1-8B layer's page is 64
    # tokens × 8 heads × (128 + 128) × 2 B = 256 KiB, a 32K request cdiv(32768, 64) = 512 blocks
    r = engine_plan("vllm", req("llama-3.1-8b", ctx=32768, seqs=4))
    page = 64 * 8 * 256 * 2
    blocks = committed(r, page, 32)
    conc = blocks / 512
    assert r.blocks == blocks
    # the H100's 79.19 GiB whole (gpu_memory_utilization 1.0): the reservation less the
    # weights, the peak and non-torch memory; the committed bytes also less the snapshot's
    # baseline and the margin (max(1 GiB, 0.75 × peak))
    gpu = find_gpu("h100")
    act = dict(r.overheads)["activation peak"]
    used = r.weights_bytes + vllm.NON_TORCH
    reserved = gpu.total_bytes - used - act
    assert r.budget_bytes == gpu.total_bytes
    assert r.kv_pool_bytes == reserved - vllm.BEFORE_SNAPSHOT - max(GiB, int(0.75 * act))
    # then each worker commits the blocks (extensible_kv_cache.py extend_kv_cache): 32 layer
    # regions of blocks × 256 KiB, each mapped in whole 2 MiB granules (8 blocks a granule)
    physical = 32 * -(-blocks // 8) * (2 << 20)
    assert r.log_lines == (
        f"Available KV cache memory: {round(reserved / GiB, 2)} GiB",
        f"GPU KV cache size: {int(conc * 32768):,} tokens, Maximum concurrency for 32,768 "
        f"tokens per request: {conc:.2f}x",
        f"Extended KV cache to {blocks} blocks ({physical / GiB:.2f} GiB).")
    # the weights, overheads and pool fill the card
    assert r.weights_bytes + sum(b for _, b in r.overheads) + r.kv_pool_bytes == gpu.total_bytes
    assert r.command == ("vllm serve meta-llama/Llama-3.1-8B --max-model-len 32768 "
                         "--max-num-seqs 4")
    # four requests need 4 × 512 blocks besides the pool's null block
    assert r.fits == (blocks - 1 >= 4 * 512)
    # an explicit utilization caps the budget (and is passed on); the extensible cache off
    # sizes within 0.92 of the card, as releases before 0.34 did
    capped = engine_plan("vllm", req("llama-3.1-8b", ctx=32768, seqs=4, settings=EngineSettings(
        gpu_memory_utilization=0.8)))
    assert capped.kv_pool_bytes == math.ceil(gpu.total_bytes * 0.8) - used - act
    assert "--gpu-memory-utilization 0.8" in capped.command
    legacy = engine_plan("vllm", req("llama-3.1-8b", ctx=32768, seqs=4, settings=EngineSettings(
        extensible_kv_cache=False)))
    assert legacy.kv_pool_bytes == math.ceil(gpu.total_bytes * 0.92) - used - act
    assert legacy.blocks == legacy.kv_pool_bytes // (page * 32)
    assert legacy.command.endswith("--no-enable-extensible-kv-cache")


@pytest.mark.parametrize(("gpu", "holding"), [
    ("h100", "CUDA context and cuBLAS"), ("mi300x", "HIP context and hipBLAS"),
    ("r9700", "HIP context and hipBLAS"),
])
def test_vllm_names_the_start_up_holding_for_the_platform(gpu, holding):
    # the snapshot's baseline is the same bytes on every card; ROCm holds a HIP context and
    # hipBLAS's handles where CUDA holds its context and cuBLAS's
    r = engine_plan("vllm", req("qwen3-8b", ctx=8192, gpu=gpu))
    assert dict(r.overheads)[f"{holding} at vLLM's snapshot"] == vllm.BEFORE_SNAPSHOT
    note = next(n for n in r.notes if "sizes the cache after warmup" in n)
    assert f"{format_bytes(vllm.BEFORE_SNAPSHOT, 2)}: {holding})" in note
    other = {"CUDA context and cuBLAS", "HIP context and hipBLAS"} - {holding}
    assert not any(o in n for n in r.notes for o in other)


@pytest.mark.parametrize(("model", "gpu", "said"), [
    ("qwen3-8b", "t4", True), ("qwen3-8b", "2080 ti", True),
    ("qwen3-8b", "a100", False), ("qwen3-8b", "mi300x", False),
    ("llama-2-7b-hf", "t4", False),  # a float16 checkpoint: nothing falls back
])
def test_vllm_says_a_bf16_checkpoint_runs_in_float16_without_bfloat16(model, gpu, said):
    # config/model.py _resolve_auto_dtype: below compute capability 8.0 the platform's
    # dtypes are float16 and float32, so --dtype auto falls back to float16; 2 bytes either way
    r = engine_plan("vllm", req(model, ctx=2048, gpu=gpu))
    notes = [n for n in r.notes if "has no bfloat16" in n]
    assert bool(notes) == said
    if said:
        card = find_gpu(gpu)
        assert notes[0].startswith(f"{card.name} (compute capability "
                                   f"{card.compute_capability}) has no bfloat16")
        assert r.weights_bytes == engine_plan("vllm", req(model, ctx=2048,
                                                         gpu="a100")).weights_bytes


def test_vllm_rejects_formats_it_lacks():
    with pytest.raises(UnsupportedFormat, match="vllm has no tbq4"):
        engine_plan("vllm", req("llama-3.1-8b", kv="tbq4"))


def test_kv_budget_mode_needs_no_gpu():
    r = engine_plan("vllm", req("llama-3.1-8b", gpu=None, kv_budget_bytes=8 * GiB))
    # --kv-cache-memory-bytes turns the extensible cache off: the pinned bytes, whole blocks
    assert r.blocks == 8 * GiB // (64 * 32 * 8 * 256 * 2) and r.kv_pool_bytes == 8 * GiB


# --- llama.cpp ----------------------------------------------------------------------------

def test_llamacpp_pads_context_to_256():
    layout = llamacpp.Layout(1000, 1, unified=False, n_ubatch=512)
    assert layout.n_ctx == 1024 and layout.cells == 1024
    three = llamacpp.Layout(1000, 3, unified=False, n_ubatch=512)
    # 3000 → 3072, per stream 1024 (already a multiple of 256)
    assert (three.cells, three.streams, three.n_ctx) == (1024, 3, 3072)
    uni = llamacpp.Layout(1000, 3, unified=True, n_ubatch=512)
    assert (uni.cells, uni.streams) == (3072, 1)


def test_llamacpp_swa_cells():
    layout = llamacpp.Layout(32768, 1, unified=False, n_ubatch=512)
    # Gemma-3: window 1024 → pad(1024 + 512) = 1536 cells
    assert layout.swa_cells(1024, swa_full=False) == 1536
    assert layout.swa_cells(1024, swa_full=True) == 32768
    mem = llamacpp.kv_bytes(load_model("gemma-3-27b-it"), 32768, 1, "f16", "f16")
    assert mem.kv_bytes == (32768 * 10 + 1536 * 52) * 16 * 256 * 2


def test_llamacpp_log_line_format():
    mem = llamacpp.kv_bytes(load_model("llama-3.1-70b"), 4096, 1, "f16", "f16")
    assert mem.lines == ["llama_kv_cache: size = 1280.00 MiB (  4096 cells,  80 layers,  1/1 "
                         "seqs), K (f16):  640.00 MiB, V (f16):  640.00 MiB"]


def test_llamacpp_quantized_v_needs_flash_attention():
    # llama.cpp refuses to start with a quantized V cache and -fa off
    with pytest.raises(InputError, match="refuses to start with a quantized V cache"):
        engine_plan("llama.cpp", req("llama-3.1-8b", kv="q8_0", gpu="4090", weights="q4_k_m",
                                     settings=EngineSettings(flash_attn=False)))
    r = engine_plan("llama.cpp", req("llama-3.1-8b", kv="f16", gpu="4090", weights="q4_k_m",
                                      settings=EngineSettings(flash_attn=False)))
    assert "-fa off" in r.command and r.fits


def test_llamacpp_rejects_hf_weights_and_unknown_formats():
    with pytest.raises(InputError, match="GGUF"):
        engine_plan("llama.cpp", req("llama-3.1-8b", weights="int4"))
    with pytest.raises(UnsupportedFormat, match="llama.cpp has no tbq4"):
        engine_plan("llama.cpp", req("llama-3.1-8b", kv="tbq4", weights="q4_k_m"))


def test_llamacpp_offload_when_too_big():
    r = engine_plan("llama.cpp", req("llama-3.1-70b", ctx=8192, gpu="4090", weights="q4_k_m"))
    assert not r.fits
    # -ngl left to --fit, which keeps the output layer and the last blocks on the card
    assert "-ngl" not in r.command
    fit = r.extra["fit"]
    assert 0 < fit["blocks_on_card"] < 80 and fit["output_on_card"]


def test_llamacpp_max_context_edge():
    base = req("qwen3.5-27b", ctx=262144, kv="q8_0", gpu="4090", weights="q4_k_m")
    r = engine_plan("llama.cpp", base)
    from dataclasses import replace
    assert engine_plan("llama.cpp", replace(base, context=r.max_context)).fits
    assert not engine_plan("llama.cpp", replace(base, context=r.max_context + 1)).fits


@pytest.mark.parametrize("model,ctx,seqs", [("qwen3-8b", 32768, 1), ("qwen3-8b", 32768, 9),
                                             ("gemma-3-27b-it", 16384, 1)])
def test_llamacpp_max_sequences_are_the_slots_that_fit(model, ctx, seqs):
    # it used to echo the asked count (1, or 0 where that did not fit): 4 fit at 32k
    from dataclasses import replace
    base = req(model, ctx=ctx, gpu="4090", weights="q4_k_m", seqs=seqs)
    n = int(engine_plan("llama.cpp", base).max_concurrency)
    assert n > 1
    assert engine_plan("llama.cpp", replace(base, sequences=n)).fits
    assert not engine_plan("llama.cpp", replace(base, sequences=n + 1)).fits


def test_llamacpp_serves_at_most_256_sequences():
    small = req("qwen3-0.6b", ctx=1024, gpu="h200")
    r = engine_plan("llama.cpp", small)
    assert r.max_concurrency == 256 and any("llama.cpp's most (-np)" in n for n in r.notes)
    from dataclasses import replace
    with pytest.raises(InputError, match="llama.cpp serves at most 256 sequences"):
        engine_plan("llama.cpp", replace(small, sequences=257))


# --- SGLang, TensorRT-LLM ------------------------------------------------------------------

def test_sglang_reserves_by_the_current_rule():
    # SGLang 0.5.23 arg_groups/memory_hook.py handle_gpu_memory_settings, in MiB:
    # reserved = 512 + 1.5 × max(chunk, 2048) + tp·pp/8 × 1024 + 2 × decode max_bs
    #            + prefill graphs (8 × captured sizes, or 1536 with MLA); ≥ 10,240 over 60 GiB.
    # Prefill capture sizes (generate_prefill_cuda_graph_batch_sizes) up to N: 4..32 by 4 (8),
    # 48..256 by 16 (14), 288..512 by 32 (8), 576..1024 by 64 (8), 1280..4096 by 256 (12),
    # 4608.. by 512: 2048 → 8+14+8+8+4 = 42, 3000 → 45, 4096 → 50, 8192 → 58, 16384 → 74
    assert [sglang.prefill_graph_sizes(n) for n in (1, 4, 2048, 3000, 4096, 8192, 16384)] == [
        0, 1, 42, 45, 50, 58, 74]
    total = 80 * GiB  # 81,920 MiB: chunk 8192, decode max_bs 256 (tp < 4)
    # 512 + 12,288 + 128 + 512 + 58·8 = 13,904 → round(68,016 / 81,920, 3) = 0.830
    assert sglang.auto_mem_fraction(total, 1, 1) == 0.830
    # chunk 2048: 512 + 3,072 + 128 + 512 + 42·8 = 4,560 → the 10 GiB floor: 71,680 / 81,920
    assert sglang.auto_mem_fraction(total, 1, 1, chunked=2048) == 0.875
    # MLA: the prefill graphs reserve 1,536: 512 + 12,288 + 128 + 512 + 1,536 = 14,976 → 0.817
    assert sglang.auto_mem_fraction(total, 1, 1, mla=True) == 0.817
    # --max-running-requests 8 caps a default decode max_bs (0.5.22): 13,904 − 512 + 16 =
    # 13,408 → round(68,512 / 81,920, 3) = 0.836
    assert sglang.auto_mem_fraction(total, 1, 1, running=8) == 0.836
    # no prefill graph: 13,440 → 0.836 (the rule before prefill graphs were reserved for)
    assert sglang.auto_mem_fraction(total, 1, 1, prefill_graph=False) == 0.836
    # a Llama-2 model path stops prefill graphs at 4096 tokens: 50·8 = 400 → 13,840 → 0.831
    assert sglang.auto_mem_fraction(total, 1, 1, llama2=True) == 0.831
    # 20-35 GiB (0.5.20: chunk 4096, max_bs 48 / 160 from 2048, 24 / 80), 24,576 MiB:
    # 512 + 6,144 + 128 + 96 + 50·8 = 7,280 → round(17,296 / 24,576, 3) = 0.704;
    # tp 4: 512 + 6,144 + 512 + 320 + 400 = 7,888 → round(16,688 / 24,576, 3) = 0.679
    assert sglang.auto_mem_fraction(24 * GiB, 1, 1) == 0.704
    assert sglang.auto_mem_fraction(24 * GiB, 4, 1) == 0.679


@pytest.mark.parametrize("model, gpu, seqs, kw, frac", [
    # H200 = 143,771 MiB (driver total): chunk 8192, decode max_bs min(256, 1) = 1;
    # 512 + 12,288 + 128 + 2 + 58·8 = 13,394 → round(130,377 / 143,771, 3) = 0.907
    ("qwen3-8b", "h200", 1, {}, 0.907),
    # Gemma-3's multimodal architecture is served text-only by default (ModelConfig
    # enable_multimodal): the prefill graphs stay and no vision factor applies
    ("gemma-3-27b-it", "h200", 1, {}, 0.907),
    # --pp 2 drops the breakable prefill graph: 512 + 12,288 + 256 + 2 = 13,058 → 0.909
    ("qwen3-8b", "h200", 1, dict(parallel=Parallel(pp=2)), 0.909),
    # Kimi Delta Attention drops it too: 512 + 12,288 + 128 + 2 = 12,930 → 0.910
    ("kimi-linear-48b-a3b-instruct", "h200", 1, {}, 0.910),
    # DeepSeek-V3 (MLA), tp 8: 512 + 12,288 + 1,024 + 2 + 1,536 = 15,362 → 0.893
    ("deepseek-v3", "h200", 1, dict(parallel=Parallel(tp=8)), 0.893),
    # H100 = 81,559 MiB: Llama-2's path caps prefill graphs at 4096 tokens (50 sizes):
    # 512 + 12,288 + 128 + 2 + 400 = 13,330 → round(68,229 / 81,559, 3) = 0.837, where
    # Llama-3.1 takes 58 sizes: 13,394 → 0.836
    ("llama-2-7b-hf", "h100", 1, {}, 0.837),
    ("llama-3.1-8b", "h100", 1, {}, 0.836),
    # a multimodal model off the breakable allow-list has no prefill graph: 12,930 → 0.841,
    # × 0.95 × (1 − 0.1 × (24·1280² / (24·1024²) − 1)) = 0.8965625 (Qwen2.5-VL's ViT)
    ("qwen2.5-vl-7b-instruct", "h100", 1, {}, 0.841 * 0.8965625),
    # Qwen3.5 is on it: 13,394 → 0.836, × 0.95 × (1 − 0.1 × 0.265625) = 0.924765625
    ("qwen3.5-9b", "h100", 1, {}, 0.836 * 0.924765625),
    # Qwen3-VL on a Hopper card ≥ 60 GiB: decode graphs grow to 300 running requests
    # (≤ 512): 512 + 12,288 + 128 + 600 = 13,528 → 0.834; at 600 they stay at the tier's 256:
    # 13,440 → 0.835; no prefill graph (not on the allow-list)
    ("qwen3-vl-8b-instruct", "h100", 300, {}, 0.834 * 0.924765625),
    ("qwen3-vl-8b-instruct", "h100", 600, {}, 0.835 * 0.924765625),
    # RTX 4090 = 24,564 MiB, the 20-35 GiB tier: 512 + 6,144 + 128 + 2 + 50·8 = 7,186 →
    # round(17,378 / 24,564, 3) = 0.707 (0.847 by the pre-0.5.20 rule)
    ("qwen3-8b", "4090", 1, {}, 0.707),
])
def test_sglang_default_fraction_per_model(model, gpu, seqs, kw, frac):
    r = engine_plan("sglang", req(model, seqs=seqs, gpu=gpu, **kw))
    assert r.extra["mem_fraction_static"] == pytest.approx(frac, abs=1e-12)
    assert any("SGLang 0.5.23 picks itself" in n for n in r.notes)


@pytest.mark.parametrize("model, reserved", [
    ("qwen3-vl-8b-instruct", True), ("qwen2.5-vl-7b-instruct", True),
    # served text-only by default (enable_multimodal): nothing reserved
    ("gemma-3-27b-it", False), ("qwen3-8b", False),
])
def test_sglang_reserves_a_multimodal_models_embedding_cache(model, reserved, monkeypatch):
    # kv_cache_configurator.py _profile_available_bytes: rest = free − slack − 100 MiB
    # (SGLANG_VLM_CACHE_SIZE_MB) for a multimodal model, before the pools are sized
    settings = EngineSettings(mem_fraction_static=0.85)
    r = engine_plan("sglang", req(model, gpu="h100", settings=settings))
    monkeypatch.setattr(sglang, "VLM_CACHE_BYTES", 0)
    bare = engine_plan("sglang", req(model, gpu="h100", settings=settings))
    assert bare.kv_pool_bytes - r.kv_pool_bytes == (100 * MiB if reserved else 0)
    line = ("Reserving 0.10 GB of the KV budget for post-sizing multimodal allocations "
            "(feature-transport pools + embedding cache).")
    assert (line in r.log_lines) == reserved
    # a KV budget given pins the pools: nothing comes off it
    pinned = engine_plan("sglang", req(model, gpu="h100", kv_budget_bytes=8 * GiB))
    assert pinned.kv_pool_bytes == 8 * GiB and line not in pinned.log_lines


def test_sglang_default_fraction_refusals_and_explicit_setting():
    # the automatic rule read is the CUDA one: an AMD card needs the fraction given
    with pytest.raises(InputError, match="sized here for CUDA cards, not AMD Instinct MI300X"):
        engine_plan("sglang", req("qwen3-8b", gpu="mi300x"))
    r = engine_plan("sglang", req("qwen3-8b", gpu="mi300x",
                                  settings=EngineSettings(mem_fraction_static=0.9)))
    assert r.extra["mem_fraction_static"] == 0.9
    assert not any("picks itself" in n for n in r.notes)
    assert "--mem-fraction-static 0.9" in r.command
    # a given chunk is passed on and sized for: 512 + 1.5·4096 + 128 + 2 + 50·8 = 7,186 MiB
    # on an H100 (81,559 MiB), raised to the 10,240 floor → round(71,319 / 81,559, 3) = 0.874
    r = engine_plan("sglang", req("qwen3-8b", settings=EngineSettings(chunked_prefill_size=4096)))
    assert r.extra["mem_fraction_static"] == 0.874
    assert "--chunked-prefill-size 4096" in r.command


def test_sglang_max_sequences_follow_the_decode_graph_reserve():
    # the fraction depends on --max-running-requests (2 MiB a decode graph up to the tier's
    # 48 on a 4090), so the most sequences is searched: that many fit, one more does not
    kw = dict(ctx=1024, gpu="4090")
    top = engine_plan("sglang", req("qwen3-8b", **kw)).max_sequences
    assert 1 < top < 48
    at = engine_plan("sglang", req("qwen3-8b", seqs=top, **kw))
    assert at.fits and at.max_sequences == top
    assert not engine_plan("sglang", req("qwen3-8b", seqs=top + 1, **kw)).fits


def test_sglang_tokens_from_rest():
    r = engine_plan("sglang", req("qwen3-8b", gpu=None, kv_budget_bytes=4 * GiB))
    assert r.kv_tokens == 4 * GiB // (36 * 8 * 256 * 2)
    assert r.log_lines[-1].startswith(f"KV Cache is allocated. dtype: torch.bfloat16, "
                                      f"#tokens: {r.kv_tokens}, K size:")


def test_sglang_mla_pool_prints_one_kv_size():
    # an MLA pool holds one latent per token: one "KV size" figure, (tokens + page) rows of
    # 61 layers × 576 values × 2 bytes
    r = engine_plan("sglang", req("deepseek-v3", gpu=None, kv_budget_bytes=8 * GiB))
    line = r.log_lines[-1]
    assert line.startswith(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {r.kv_tokens}, "
                           "KV size: ")
    assert "K size" not in line
    gb = float(line.split("KV size: ")[1].split()[0])
    assert gb == round((r.kv_tokens + 1) * 61 * 576 * 2 / GiB, 2)


def test_trtllm_rounds_up_to_whole_blocks():
    r = engine_plan("trtllm", req("qwen3-8b", gpu=None, kv_budget_bytes=4 * GiB))
    per_token = 36 * 8 * 256 * 2
    assert r.kv_tokens == -(-(4 * GiB // per_token) // 32) * 32


def test_trtllm_hybrid_state_slots_come_off_the_budget():
    # Qwen3-Next: 36 Gated DeltaNet layers of 32 × 128 × 128 (delta rule) + 3 × (2·16·128 +
    # 32·128) (conv) values, held in bf16 for max_batch_size × pp + 1 slots; 12 attention
    # layers × 2 KV heads × (256 + 256) × 2 bytes per token
    r = engine_plan("trtllm", req("qwen3-next-80b-a3b-instruct", gpu=None, seqs=4,
                                  kv_budget_bytes=8 * GiB))
    per_slot = 36 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * 2
    per_token = 12 * 2 * 512 * 2
    assert r.extra["state_bytes"] == 5 * per_slot
    assert r.kv_tokens == -(-((8 * GiB - 5 * per_slot) // per_token) // 32) * 32
    # a pipeline of two stages holds twice the slots, each stage its own layers' state
    r2 = engine_plan("trtllm", req("qwen3-next-80b-a3b-instruct", gpu=None, seqs=4,
                                   kv_budget_bytes=8 * GiB, parallel=Parallel(pp=2)))
    assert r2.extra["state_slots"] == 9
    # more sequences need more slots: the most that fit is below the stateless count
    assert r.sequences_max < r.kv_tokens // 8192
    assert engine_plan("trtllm", req("qwen3-8b", gpu=None, kv_budget_bytes=8 * GiB)
                       ).extra["state_bytes"] == 0


@pytest.mark.parametrize("model", ["deepseek-v2-lite-chat", "phi-3.5-moe-instruct",
                                   "olmo-3.1-32b-instruct", "lfm2.5-vl-1.6b", "minimax-m1-80k",
                                   "gemma-2-9b", "gemma-2-2b", "glm-4-9b"])
def test_trtllm_refuses_architectures_it_does_not_run(model):
    with pytest.raises(InputError, match="TensorRT-LLM's PyTorch backend has no"):
        engine_plan("trtllm", req(model))


def test_trtllm_keeps_a_float32_checkpoint_in_float32():
    # SmolLM-1.7B's config says float32: the PyTorch backend builds the model and, with
    # kv_cache_config.dtype auto, the cache in that dtype (24 layers × 32 heads × 64 × K+V)
    r = engine_plan("trtllm", req("smollm-1.7b", gpu=None, kv_budget_bytes=4 * GiB))
    per_token = 24 * 2 * 32 * 64 * 4
    assert r.extra["bytes_per_token"] == per_token
    assert r.kv_tokens == -(-(4 * GiB // per_token) // 32) * 32
    assert r.extra["weights"] == "f32"
    # fp8 is still asked for explicitly; a 16-bit checkpoint keeps 2 bytes
    assert engine_plan("trtllm", req("smollm-1.7b", gpu=None, kv="fp8_e4m3",
                                     kv_budget_bytes=4 * GiB)).extra["bytes_per_token"] \
        == per_token // 4
    assert engine_plan("trtllm", req("qwen3-8b", gpu=None, kv_budget_bytes=4 * GiB)
                       ).extra["bytes_per_token"] == 36 * 2 * 8 * 128 * 2


# --- inverse questions ---------------------------------------------------------------------

def test_find_gpu_smallest_fits_and_smaller_does_not():
    q = Query(spec=load_model("llama-3.1-8b"), context=131072, sequences=2, engine="vllm",
              gpus=(find_gpu("4090"),))
    rows = find_gpu_for(q)
    assert rows
    best = rows[0]
    assert all(r["total_memory_bytes"] >= best["total_memory_bytes"] for r in rows)
    from dataclasses import replace
    ok = engine_plan("vllm", replace(q, gpus=(find_gpu(best["gpu"]),),
                                     parallel=Parallel(tp=best["count"])).engine_request())
    assert ok.fits


def test_find_gpu_never_stacks_single_box_machines():
    q = Query(spec=load_model("qwen2.5-72b"), context=131072, sequences=8, engine="vllm")
    rows = find_gpu_for(q, limit=200)
    assert rows
    for r in rows:
        assert r["count"] <= find_gpu(r["gpu"]).max_cards, r
    # unified-memory boxes are one device each; Apple never joins a tensor-parallel group
    assert find_gpu("m2-ultra").max_cards == 1 and find_gpu("jetson agx orin").max_cards == 1
    assert all(r["gpu"] not in {"jetson-agx-orin-64gb", "dgx-spark"} for r in rows)


def test_find_format_orders_by_precision():
    q = Query(spec=load_model("qwen3.5-27b"), context=262144, engine="llama.cpp",
              weights="q4_k_m", gpus=(find_gpu("4090"),))
    rows = find_format(q)
    names = [r["format"] for r in rows]
    assert names[0] in ("f16", "bf16") and "q4_0" in names and "tbq4" not in names
    fits = {r["format"]: r["fits"] for r in rows}
    assert not fits["f16"] and fits["q4_0"]
    bits = [r["bits_per_value"] for r in rows]
    assert bits == sorted(bits, reverse=True)


def test_find_format_gives_the_bits_a_value_on_the_model():
    # gpt-oss-20b's heads are 64 wide: tbq4's 128-value rotation blocks pad each row to 128
    # (8.25 bits a value here, not 4.125), fp8_pth's per-row scale is 4 bytes over 64 values
    # (8.5), q4_0's 32-value blocks fit whole (4.5, no note)
    q = Query(spec=load_model("gpt-oss-20b"), context=131072,
              kv_budget_bytes=20 * GiB)
    rows = {r["format"]: r for r in find_format(q)}
    assert rows["tbq4"]["bits_per_value"] == 4.125
    assert rows["tbq4"]["bits_per_value_here"] == 8.25
    assert "8.25 bits a value on this model" in rows["tbq4"]["quality"]
    assert "128-value blocks" in rows["tbq4"]["quality"]
    assert rows["fp8_pth"]["bits_per_value_here"] == 8.5
    assert "per-row scales" in rows["fp8_pth"]["quality"]
    assert rows["q4_0"]["bits_per_value_here"] == 4.5
    assert "on this model" not in rows["q4_0"]["quality"]
    # a model whose heads fill the blocks: the same bits as the format's
    q = Query(spec=load_model("llama-3.1-8b"), context=8192, kv_budget_bytes=20 * GiB)
    assert all("on this model" not in r["quality"] for r in find_format(q))


def test_gpus_list_must_match_ranks():
    with pytest.raises(InputError, match="tp × pp"):
        Query(spec=load_model("qwen3-8b"), context=4096, gpus=(find_gpu("4090"),) * 3,
              parallel=Parallel(tp=2))


def test_sglang_sliding_window_pools():
    r = engine_plan("sglang", req("gpt-oss-20b", gpu=None, kv_budget_bytes=4 * GiB))
    per_layer = 8 * 64 * 2 * 2  # 8 KV heads × (64 + 64) × 2 B
    full, swa = 12 * per_layer, 12 * per_layer
    expected = int(4 * GiB / (full + 0.8 * swa))
    assert r.kv_tokens == expected
    assert r.extra["swa_tokens"] == int(expected * 0.8)
    assert r.log_lines[0].startswith("Use sliding window memory pool.")


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_offload_tier_adds_a_capacity_line(engine):
    r = engine_plan(engine, req("qwen3-8b", gpu=None, kv_budget_bytes=4 * GiB,
                                settings=EngineSettings(offload_bytes=32 * GiB)))
    per_token = 36 * 8 * 256 * 2
    assert r.offload_tokens == pytest.approx(32 * GiB / per_token, rel=0.01)


def test_sglang_mamba_pool_takes_its_share():
    r = engine_plan("sglang", req("qwen3.5-27b", gpu=None, kv_budget_bytes=19 * GiB))
    g = next(g for g in load_model("qwen3.5-27b").groups if g.kind == "linear")
    per_req = g.count * (g.conv_state_values * 2 + (g.state_values - g.conv_state_values) * 4)
    # 0.5.23 (kv_cache_configurator _handle_max_mamba_cache): int((budget − per_req) //
    # per_req) slots, the pool's padding slot apart
    slots = int(19 * GiB * 0.9 / 1.9) // per_req - 1
    assert r.extra["mamba_slots"] == slots
    # it returns the rest less the slots' bytes and the padding slot's
    assert r.kv_tokens == (19 * GiB - (slots + 1) * per_req) // (16 * 4 * 512 * 2)


def test_sglang_kv_pool_keeps_what_the_mamba_slots_leave():
    # Nemotron-H 56B: 54 Mamba2 layers × (3 × 20,480 bf16 + 256 × 64 × 256 f32) = 870 MiB a
    # request; 40 GiB holds int(40 GiB × 0.9 / 1.9) // 870 MiB = 22 slots (19.1 GiB): 21 for
    # requests and the pool's padding slot, and the KV pool 20.9 GiB, not the ratio's 21.05 GiB
    r = engine_plan("sglang", req("nemotron-h-56b-base-8k", gpu=None, kv_budget_bytes=40 * GiB))
    per_req = 54 * (3 * 20480 * 2 + 256 * 64 * 256 * 4)
    slots = int(40 * GiB * 0.9 / 1.9) // per_req - 1
    assert r.extra["mamba_slots"] == slots == 21
    assert r.kv_tokens == (40 * GiB - (slots + 1) * per_req) // (10 * 8 * 256 * 2)


@pytest.mark.parametrize("kwargs, field", [({"context": 0}, "context"),
                                           ({"context": 4096, "sequences": 0}, "sequences")])
def test_engine_request_checks_the_workload_like_a_plan(kwargs, field):
    spec = load_model("llama-3.1-8b")
    with pytest.raises(InputError) as err:
        EngineRequest(spec=spec, **kwargs)
    assert err.value.field == field


@pytest.mark.parametrize("engine", ["raw", "llama.cpp", "vllm", "sglang", "trtllm"])
def test_every_engine_asks_for_a_gpu_or_a_budget(engine):
    with pytest.raises(InputError, match=r"--gpu\) or an available KV budget") as err:
        engine_plan(engine, EngineRequest(spec=load_model("llama-3.1-8b"), context=4096))
    assert err.value.field == "gpu"


def test_vllm_with_no_memory_left_says_so():
    # Llama-3.1-70B in bf16 (131 GiB) on one 80 GB card: vLLM's pool is negative, and its
    # check refuses before comparing a request with the pool (docs/ENGINES.md)
    r = engine_plan("vllm", req("llama-3.1-70b", gpu="h100"))
    assert r.kv_pool_bytes < 0 and not r.fits
    assert r.log_lines[-1] == (
        "ValueError: No available memory for the cache blocks. The extensible KV cache already "
        "takes all device memory left after the model and its activations; decrease "
        "`max_model_len` or `max_num_seqs`, or the model needs a device with more memory.")
    assert not any("To serve at least one request" in line for line in r.log_lines)
    # with a utilization under 1.0 the advice is to raise it; without the extensible cache,
    # the advice of earlier releases
    capped = engine_plan("vllm", req("llama-3.1-70b", gpu="h100",
                                     settings=EngineSettings(gpu_memory_utilization=0.9)))
    assert "within `gpu_memory_utilization`=0.9; increase it" in capped.log_lines[-1]
    legacy = engine_plan("vllm", req("llama-3.1-70b", gpu="h100",
                                     settings=EngineSettings(extensible_kv_cache=False)))
    assert legacy.log_lines[-1].endswith("Try increasing `gpu_memory_utilization` when "
                                         "initializing the engine (this flag also controls CPU "
                                         "memory reservation on the CPU backend, despite its "
                                         "name).")
    # v1/engine/core.py: get_kv_cache_configs raises before update_kv_cache_capacity, so no
    # capacity line is printed at all
    assert len(r.log_lines) == 2 and r.log_lines[0].startswith("Available KV cache memory: -")
    assert not any("GPU KV cache size" in line for line in r.log_lines)


def test_ranks_keep_every_cached_layer_of_a_model_with_cacheless_blocks():
    # Nemotron-H: 118 blocks numbered 0-117, 64 of them cached (10 attention, 54 Mamba); the
    # ranks used to keep only the layers numbered below 64
    from kvcore.kv import cache_size

    spec = load_model("nemotron-h-56b-base-8k")
    assert spec.decoder_layers == 118 and spec.num_layers == 64
    whole = cache_size(spec, 32768, 1).total_bytes
    one = rank_spec(spec, Parallel(tp=1))
    assert one.num_layers == 64 and cache_size(one, 32768, 1).total_bytes == whole
    # two stages split the 118 blocks (59 each), and between them hold every cached layer
    stages = [rank_spec(spec, Parallel(pp=2), s) for s in (0, 1)]
    assert sum(s.num_layers for s in stages) == 64
    assert all(i < 59 for g in stages[0].groups for i in g.layers)
    assert all(i >= 59 for g in stages[1].groups for i in g.layers)
    assert sum(cache_size(s, 32768, 1).total_bytes for s in stages) == whole
    # vLLM's pool at tp 2 holds half the heads a rank: about as many tokens as at tp 1
    tokens = [engine_plan("vllm", req("nemotron-h-56b-base-8k", gpu="h200", ctx=32768,
                                      parallel=Parallel(tp=tp))).kv_tokens for tp in (1, 2)]
    assert tokens[1] > tokens[0]


def test_vllm_says_the_cuda_graph_memory_it_sets_aside_is_not_subtracted():
    said = "its CUDA graphs (\"Graph capturing finished in N secs, took X GiB\") come off it"
    r = engine_plan("vllm", req("qwen3-8b"))
    assert any(said in n for n in r.notes) and "--enforce-eager" not in r.command
    # without the extensible cache the estimate is what comes off
    legacy = engine_plan("vllm", req("qwen3-8b", settings=EngineSettings(
        extensible_kv_cache=False)))
    assert any("sets aside the CUDA-graph memory it estimates" in n for n in legacy.notes)
    # --enforce-eager: no graphs, nothing set aside, and the command says so; a given KV
    # budget is the pool whatever the graphs took
    r = engine_plan("vllm", req("qwen3-8b", settings=EngineSettings(enforce_eager=True)))
    assert not any(said in n for n in r.notes) and r.command.endswith("--enforce-eager")
    r = engine_plan("vllm", req("qwen3-8b", gpu=None, kv_budget_bytes=4 * GiB))
    assert not any(said in n for n in r.notes)
    launch = read_command("vllm serve Qwen/Qwen3-8B --enforce-eager --max-model-len 8192")
    assert launch.settings["enforce_eager"] is True and not launch.unread
    with pytest.raises(InputError, match="enforce_eager is a setting of vLLM"):
        check_settings("sglang", EngineSettings(enforce_eager=True))


def test_sglang_max_total_tokens_caps_the_pool_never_raises_it():
    per_token = 36 * 8 * 256 * 2  # Qwen3-8B: 36 layers × 8 KV heads × (128 + 128) × 2 B
    profiled = 4 * GiB // per_token
    base = dict(gpu=None, kv_budget_bytes=4 * GiB, ctx=8192)
    r = engine_plan("sglang", req("qwen3-8b", settings=EngineSettings(max_total_tokens=20_000),
                                  **base))
    assert r.kv_tokens == 20_000 and r.max_sequences == 20_000 // 8192
    assert "--max-total-tokens 20000" in r.command
    # the rest of the budget is not allocated: the pool reported is what the cap holds
    assert r.kv_pool_bytes == 4 * GiB - (profiled - 20_000) * per_token
    assert any(f"caps the KV pool at 20,000 tokens of the {profiled:,}" in n for n in r.notes)
    assert r.log_lines[0].startswith("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 20000, ")
    # rounded down to the page
    r = engine_plan("sglang", req("qwen3-8b", settings=EngineSettings(
        max_total_tokens=20_000, page_size=64), **base))
    assert r.kv_tokens == 20_000 // 64 * 64
    # a cap under one request does not fit it, and says why
    r = engine_plan("sglang", req("qwen3-8b", settings=EngineSettings(max_total_tokens=5000),
                                  **base))
    assert not r.fits and r.max_context == 5000
    # a cap above the profile: SGLang warns and keeps the profiled count
    r = engine_plan("sglang", req("qwen3-8b", settings=EngineSettings(
        max_total_tokens=10 ** 7), **base))
    assert r.kv_tokens == profiled and r.kv_pool_bytes == 4 * GiB
    assert r.log_lines[0] == (f"max_total_tokens=10000000 is larger than the profiled value "
                              f"{profiled}. Use the profiled value instead.")
    # a cap of less than a page leaves an empty pool: SGLang refuses to start
    r = engine_plan("sglang", req("qwen3-8b", settings=EngineSettings(
        max_total_tokens=10, page_size=64), **base))
    assert not r.fits and "Not enough memory" in r.refusal
    with pytest.raises(InputError, match="max_total_tokens must be a whole number"):
        EngineSettings(max_total_tokens=0)


def test_sglang_max_total_tokens_caps_the_full_pool_of_sliding_window_models():
    # gpt-oss: the cap is the full pool's; the window pool is sized again from it
    r = engine_plan("sglang", req("gpt-oss-20b", gpu=None, kv_budget_bytes=4 * GiB,
                                  settings=EngineSettings(max_total_tokens=50_000)))
    assert r.kv_tokens == 50_000 and r.extra["swa_tokens"] == 40_000
    per_layer = 8 * 64 * 2 * 2
    profiled = int(4 * GiB / (12 * per_layer + 0.8 * 12 * per_layer))
    assert r.log_lines[0] == (f"Use sliding window memory pool. full_layer_tokens={profiled}, "
                              f"swa_layer_tokens={int(profiled * 0.8)}")
    assert r.log_lines[1] == ("Use sliding window memory pool. full_layer_tokens=50000, "
                              "swa_layer_tokens=40000")
    unused = (profiled - 50_000 + int(profiled * 0.8) - 40_000) * 12 * per_layer
    assert r.kv_pool_bytes == 4 * GiB - unused
    # the window pool sized from the cap can refuse the window's admission floor
    r = engine_plan("sglang", req("gpt-oss-20b", gpu=None, kv_budget_bytes=4 * GiB, ctx=64,
                                  settings=EngineSettings(max_total_tokens=128)))
    assert not r.fits and "SWA pool (102 tokens) cannot hold even one request" in r.refusal


def test_sglang_pools_sliding_windows_only_for_its_hybrid_architectures():
    # gpt-oss: two pools, and the sizes printed are each pool's own layers
    r = engine_plan("sglang", req("gpt-oss-20b", gpu=None, kv_budget_bytes=4 * GiB))
    per_layer = 8 * 64 * 2 * 2
    # 0.5.23 builds the full layers' pool first and labels each
    full_line, swa_line = r.log_lines[1], r.log_lines[2]
    assert full_line.startswith(f"Full KV Cache is allocated. dtype: torch.bfloat16, "
                                f"#tokens: {r.kv_tokens}, ")
    assert swa_line.startswith(f"SWA KV Cache is allocated. dtype: torch.bfloat16, "
                               f"#tokens: {r.extra['swa_tokens']}, ")
    assert f"K size: {(r.extra['swa_tokens'] + 1) * 12 * per_layer / 2 / GiB:.2f} GB" in swa_line
    assert f"K size: {(r.kv_tokens + 1) * 12 * per_layer / 2 / GiB:.2f} GB" in full_line
    # Gemma 3 and Mistral: one pool, every layer holding every token (SGLang disables its
    # hybrid pool for them)
    for model in ("gemma-3-27b-it", "mistral-7b-v0.1"):
        spec = load_model(model)
        r = engine_plan("sglang", req(model, gpu=None, kv_budget_bytes=4 * GiB))
        cell = sum(g.count * g.n_kv_heads * (g.head_dim_k + g.head_dim_v) * 2
                   for g in spec.groups)
        assert r.kv_tokens == 4 * GiB // cell and r.extra["swa_tokens"] is None
        assert len(r.log_lines) == 1


def test_vllm_batched_tokens_default_by_card():
    # `vllm serve` 0.33.0 and 0.34.0 (engine/arg_utils.py get_batch_defaults): 16384 on cards
    # of 160 GiB or more, 8192 from 70 GiB but on A100s and GB10, else 2048; at most
    # max_num_seqs × max_model_len
    from kvcore.engines.vllm import default_batched_tokens

    assert default_batched_tokens(find_gpu("h100"), 1, 32768) == 8192
    assert default_batched_tokens(find_gpu("h200"), 1, 32768) == 8192      # 141 GB < 160 GiB
    assert default_batched_tokens(find_gpu("b200"), 1, 32768) == 16384
    assert default_batched_tokens(find_gpu("gb10"), 1, 32768) == 2048      # 128 GiB, sm121
    assert default_batched_tokens(find_gpu("4090"), 1, 32768) == 2048
    assert default_batched_tokens(find_gpu("a100-80gb"), 1, 32768) == 2048
    assert default_batched_tokens(find_gpu("h100"), 2, 1000) == 2000
    assert default_batched_tokens(None, 1, 32768) == 8192
    # the sliding-window reservation follows it: W − 1 + 2 × 2048 in flight on a 4090
    r = engine_plan("vllm", req("gpt-oss-20b", ctx=32768, gpu="4090"))
    assert any("4,096 in-flight tokens (2 × max_num_batched_tokens 2,048)" in n
               for n in r.notes)


def test_vllm_reports_concurrency_times_length_for_a_sliding_window_model():
    # one sliding-window group: a request holds only its window's blocks, and vLLM prints
    # max concurrency × max_model_len (not blocks × block size)
    r = engine_plan("vllm", req("mistral-7b-v0.1", ctx=32768, gpu="h200"))
    assert r.kv_tokens == int(r.max_concurrency * 32768)
    assert r.kv_tokens > r.blocks * r.block_tokens


def test_sglang_lowers_its_memory_fraction_for_a_vision_encoder():
    # adjust_mem_fraction_for_vlm: 0.95 × (1 − 0.1 × (layers·hidden² / (24·1024²) − 1)), the
    # second factor kept within 0.8-1.05; Qwen2.5-VL's ViT: 24 layers × 1280
    from kvcore.engines.sglang import auto_mem_fraction, vision_factor

    spec = load_model("qwen2.5-vl-7b-instruct")
    assert spec.vision_encoder == (24, 1280)
    ratio = 24 * 1280 ** 2 / (24 * 1024 ** 2)
    assert vision_factor(24, 1280) == pytest.approx(0.95 * (1 - 0.1 * (ratio - 1)))
    assert vision_factor(64, 4096) == pytest.approx(0.95 * 0.8)
    h200 = find_gpu("h200")
    r = engine_plan("sglang", req("qwen2.5-vl-7b-instruct", ctx=32768, gpu="h200"))
    # multimodal off the breakable allow-list: no prefill graph reserved
    assert r.extra["mem_fraction_static"] == pytest.approx(
        auto_mem_fraction(h200.total_bytes, 1, 1, running=1, prefill_graph=False)
        * vision_factor(24, 1280))
    # Gemma 3 has a vision encoder but SGLang serves it text-only unless asked: no factor
    assert load_model("gemma-3-27b-it").vision_encoder == (27, 1152)
    r = engine_plan("sglang", req("gemma-3-27b-it", ctx=32768, gpu="h200"))
    assert r.extra["mem_fraction_static"] == auto_mem_fraction(h200.total_bytes, 1, 1, running=1)
    # a text-only model keeps the automatic fraction
    assert load_model("qwen3-8b").vision_encoder is None
    r = engine_plan("sglang", req("qwen3-8b", ctx=32768, gpu="h200"))
    assert r.extra["mem_fraction_static"] == auto_mem_fraction(h200.total_bytes, 1, 1, running=1)


def test_llamacpp_splits_layers_as_llama_cpp_does():
    # -sm layer with an even split: layer i on the first device whose cumulative share exceeds
    # i / (n_layer + 1); OLMoE's 16 layers on two Hexagon sessions were 9 and 7
    # (tests/data/engine_logs/llamacpp-olmoe-1b-7b-hexagon-q8kv.toml)
    from kvcore.parallel import llamacpp_stage_layers

    assert [len(llamacpp_stage_layers(16, 2, s)) for s in (0, 1)] == [9, 7]
    assert [len(llamacpp_stage_layers(32, 2, s)) for s in (0, 1)] == [17, 15]
    assert list(llamacpp_stage_layers(32, 2, 1)) == list(range(17, 32))
    r = engine_plan("llama.cpp", req("llama-3.1-8b", ctx=32768, gpu="4090", weights="q4_k_m",
                                     parallel=Parallel(pp=2)))
    # a buffer line a device (17 and 15 layers of 128 KiB a token), then the cache's line
    assert r.log_lines[0].endswith("CUDA0 KV buffer size =  2176.00 MiB")
    assert r.log_lines[1].endswith("CUDA1 KV buffer size =  1920.00 MiB")
    assert "size = 4096.00 MiB ( 32768 cells,  32 layers" in r.log_lines[2]
    assert r.extra["kv_bytes"] == 17 * 32768 * 8 * 128 * 2 * 2


def test_llamacpp_split_logs_buffers_per_cache_object():
    # -sm layer over 2 devices: each llama_kv_cache logs its buffer lines (one a device
    # holding its layers, buffer types in name order) and then its own size line, before
    # llama_kv_cache_iswa creates the next one (src/llama-kv-cache.cpp ctor,
    # src/llama-kv-cache-iswa.cpp ctor). gpt-oss-20b: 24 layers, layer i on CUDA0 while
    # i / 25 < 1/2, so 0..12 there (sliding 0, 2, .., 12: 7; full 1, .., 11: 6) and 13..23 on
    # CUDA1 (sliding 14, .., 22: 5; full 13, .., 23: 6). 8 heads × 64 f16 = 1,024 B a row.
    # non-SWA: 32,768 cells × 2,048 B = 64 MiB a layer; SWA: PAD256(128 + 512) = 768 cells,
    # 1.5 MiB a layer
    r = engine_plan("llama.cpp", req("gpt-oss-20b", ctx=32768, gpu="h200",
                                     parallel=Parallel(pp=2)))
    assert list(r.log_lines) == [
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 32768 cells",
        "llama_kv_cache:      CUDA0 KV buffer size =   384.00 MiB",
        "llama_kv_cache:      CUDA1 KV buffer size =   384.00 MiB",
        "llama_kv_cache: size =  768.00 MiB ( 32768 cells,  12 layers,  1/1 seqs), "
        "K (f16):  384.00 MiB, V (f16):  384.00 MiB",
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells",
        "llama_kv_cache:      CUDA0 KV buffer size =    10.50 MiB",
        "llama_kv_cache:      CUDA1 KV buffer size =     7.50 MiB",
        "llama_kv_cache: size =   18.00 MiB (   768 cells,  12 layers,  1/1 seqs), "
        "K (f16):    9.00 MiB, V (f16):    9.00 MiB",
    ]


def test_llamacpp_split_hybrid_logs_the_recurrent_buffers_after_the_kv_cache():
    # llama_memory_hybrid builds mem_attn (a llama_kv_cache: its buffers, its size line), then
    # mem_recr (llama_memory_recurrent: "RS buffer size" lines, then its size line).
    # Qwen3.5-27B: 64 layers, 0..32 on CUDA0 (i / 65 < 1/2), every 4th layer (3, 7, ..)
    # full attention: 8 full and 25 GDN layers there, 8 and 23 on CUDA1. A GDN layer's state:
    # (3 × 10,240 + 48 × 128 × 128) × 4 B = 3,268,608 B for one cell
    r = engine_plan("llama.cpp", req("qwen3.5-27b", ctx=32768, gpu="h200",
                                     parallel=Parallel(pp=2)))
    lines = list(r.log_lines)
    assert [ln.split(":")[0] for ln in lines] == ["llama_kv_cache"] * 3 + ["llama_memory_recurrent"] * 3
    # full: 4 heads × 256 f16 = 2,048 B a row, K and V, 32,768 cells: 128 MiB a layer
    assert lines[0].endswith("CUDA0 KV buffer size =  1024.00 MiB")
    assert lines[1].endswith("CUDA1 KV buffer size =  1024.00 MiB")
    assert lines[3] == (f"llama_memory_recurrent:      CUDA0 RS buffer size = "
                        f"{25 * 3_268_608 / 2**20:>8.2f} MiB")
    assert lines[4] == (f"llama_memory_recurrent:      CUDA1 RS buffer size = "
                        f"{23 * 3_268_608 / 2**20:>8.2f} MiB")
    assert lines[5].startswith("llama_memory_recurrent: size = ")


def test_llamacpp_keeps_the_token_embedding_in_host_memory():
    # llama.cpp never offloads the input layer; the output layer sits on the last device
    # (untied: the lm_head, half of the embedding bytes; tied: a copy of the embedding)
    from kvcore.weights import weights_for

    spec = load_model("llama-3.1-8b")
    w = weights_for(spec, "q4_k_m")
    assert w.lm_head_separate
    r = engine_plan("llama.cpp", req("llama-3.1-8b", gpu="4090", weights="q4_k_m"))
    # Q4_K_M: the output matrix in Q6_K, the token embedding in Q4_K
    assert r.weights_bytes == w.bytes - w.input_bytes
    assert w.input_bytes * 210 == w.head_bytes * 144
    v = engine_plan("vllm", req("llama-3.1-8b", gpu="4090", weights="int4"))
    wi = weights_for(spec, "int4")
    assert v.weights_bytes == wi.bytes


# --- what a plan says it can hold, it holds ---------------------------------------------------

def _answer(model, engine, **kw):
    from app.common import make_query
    from kvcore.query import answer
    return answer(make_query(load_model(model), engine=engine, **kw))


@pytest.mark.parametrize("model, engine, kw", [
    # llama.cpp reported the sequences asked for as the most that fit
    ("qwen2.5-7b", "llama.cpp", dict(gpu="l4", context="4k")),
    ("qwen3.5-9b", "llama.cpp", dict(gpu="4090", context="32k", sequences=2)),
    # vLLM's default max_num_batched_tokens follows max-num-seqs × max-model-len: the activation
    # peak of the longer context or more sequences leaves less KV memory
    ("mistral-nemo-instruct-2407", "vllm", dict(gpu="rtx-pro-6000", context=4096, kv="nvfp4")),
    ("llama-3.1-8b", "vllm", dict(gpu="l4", context=1024)),
    # data parallel: sequences are per replica (--max-num-seqs), and so is the most that fit
    ("llama-3.1-8b", "vllm", dict(gpu="h100", gpus="2", dp=2, context="32k", sequences=4)),
    ("llama-3.1-8b", "trtllm", dict(gpu="h100", gpus="2", dp=2, context="32k", sequences=4)),
    ("llama-3.1-8b", "sglang", dict(gpu="h100", gpus="2", dp=2, context="32k", sequences=4)),
    ("llama-3.1-8b", "raw", dict(gpu="h100", gpus="2", dp=2, context="32k", sequences=4)),
    # SGLang: a hybrid model's requests each take 3 slots of the Mamba state pool
    ("qwen3.5-9b", "sglang", dict(gpu="5090", context="4k")),
])
def test_max_context_and_max_sequences_replan(model, engine, kw):
    data = _answer(model, engine, **kw)
    ctx, seqs = data["max_context"], data["max_sequences"]
    assert ctx > 0 and seqs > 0
    at_ctx = _answer(model, engine, **{**kw, "context": ctx})
    assert at_ctx["fits"] and at_ctx["max_context"] == ctx
    assert not _answer(model, engine, **{**kw, "context": ctx + 1})["fits"]
    at_seqs = _answer(model, engine, **{**kw, "sequences": seqs})
    assert at_seqs["fits"] and at_seqs["max_sequences"] == seqs
    assert not _answer(model, engine, **{**kw, "sequences": seqs + 1})["fits"]
    # the verdict agrees with the two limits
    assert data["fits"] == (data["context"] <= ctx and data["sequences"] <= seqs)


def test_vllm_hybrid_block_is_a_multiple_of_a_configured_block_size():
    # Qwen3-Next (tp 1): 2 KV heads × 512 values × 2 B = 2,048 B a token; one GDN state page
    # 1,097,728 B. vLLM aligns to max(16, --block-size): 544 tokens at 16 and at 32 (both
    # divide 544), but 576 at 64 (9 × 64; 544 is not a multiple of 64)
    spec = load_model("qwen3-next-80b-a3b-instruct")
    for block, want in ((16, 544), (32, 544), (64, 576), (1024, 1024)):
        pool = vllm.pool(spec, 10 * GiB, F16, F16, block)
        assert pool.min_block == want, block


def test_vllm_kda_state_is_float32():
    # Kimi Delta Attention: conv 3 × 12,288 in bf16 + a 32 × 128 × 128 matrix in float32
    # (kda_state_dtype), whatever the checkpoint dtype: 2,170,880 B a state page; MLA pages
    # hold 576 × 2 B a token, and an MLA hybrid aligns its block to 128 tokens (0.33.0
    # platforms/interface.py _align_hybrid_block_size: the TRTLLM/FlashInfer MLA kernels'
    # rule), so blocks of 128 × cdiv(2,170,880, 128 × 1,152) = 1,920 tokens (16-token
    # alignment, before: 1,888)
    spec = load_model("kimi-linear-48b-a3b-instruct")
    assert spec.ssm_dtype_bytes == 4
    pool = vllm.pool(spec, 10 * GiB, F16, F16, 16)
    assert pool.min_block == 1920
    assert pool.page == 1920 * 1152


@pytest.mark.parametrize("model", ["mistral-7b-v0.1", "phi-3-mini-128k-instruct",
                                   "phi-3.5-moe-instruct"])
def test_llamacpp_keeps_no_window_where_its_architecture_has_none(model):
    # Mistral converts to llama.cpp's llama architecture (no sliding window read), Phi-3
    # turns its window off, PhiMoE reads none: one cache of n_ctx cells for every layer
    spec = load_model(model)
    mem = llamacpp.kv_bytes(spec, 32768, 1, "f16", "f16")
    g = spec.groups[0]
    assert len(spec.groups) == 1 and g.kind == "sliding"
    assert mem.kv_bytes == g.count * g.n_kv_heads * 2 * g.head_dim_k * 2 * 32768
    assert not any("SWA" in line for line in mem.lines)
    r = engine_plan("llama.cpp", req(model, ctx=32768))
    assert any("without its sliding window" in n for n in r.notes)


def test_llamacpp_keeps_the_window_where_its_architecture_has_one():
    # Gemma-2 (llama.cpp's gemma2 sets a 4,096-token window on every other layer)
    spec = load_model("gemma-2-9b")
    mem = llamacpp.kv_bytes(spec, 32768, 1, "f16", "f16")
    assert any("SWA KV cache, size = 4608 cells" in line for line in mem.lines)


@pytest.mark.parametrize("engine", ["llama.cpp", "ollama"])
def test_the_plans_table_keeps_the_whole_context_where_llamacpp_does(engine):
    # Mistral-7B-v0.1 under llama.cpp: every layer keeps the whole context (no window), so
    # the plan's own table holds what llama.cpp logs, not the 4,096-token window
    from app.common import make_query
    from kvcore.query import answer

    spec = load_model("mistral-7b-v0.1")
    ctx, seqs = 32768, 2
    data = answer(make_query(spec, context=ctx, sequences=seqs, engine=engine, gpu="4090"))
    (g,) = data["breakdown"]
    assert g["k_bytes"] == g["v_bytes"] == 32 * 8 * 128 * 2 * ctx * seqs
    assert (g["kind"], g["tokens_per_sequence"]) == ("sliding", ctx)
    assert g["description"].endswith("window 4,096 kept whole")
    # the model keeps its own kinds, and llama.cpp's log line says the same bytes
    assert [x["kind"] for x in data["model"]["groups"]] == ["sliding"]
    assert any(f"K (f16): {g['k_bytes'] / 2**20:.2f} MiB" in line
               for line in data["engine_report"]["log_lines"])
    # its decode reads them all
    assert data["decode"]["kv_share"] * data["decode"]["bytes_per_step"] == pytest.approx(
        data["kv_bytes"], rel=1e-9)
    raw = answer(make_query(spec, context=ctx, sequences=seqs, engine="raw", gpu="4090"))
    assert raw["breakdown"][0]["tokens_per_sequence"] == 4096


@pytest.mark.parametrize(("model", "engine", "whole", "reads_whole"), [
    # SGLang gives Gemma 3 one pool (not a hybrid-SWA model there), whose attention still
    # applies the window; Mistral's class passes no window at all
    ("gemma-3-27b-it", "sglang", True, False),
    ("mistral-7b-v0.1", "sglang", True, True),
    # gpt-oss has a sliding-window pool of its own under SGLang
    ("gpt-oss-20b", "sglang", False, False),
    # TensorRT-LLM prices every attention layer for every token
    ("gemma-3-27b-it", "trtllm", True, False),
    ("gemma-3-27b-it", "vllm", False, False),
])
def test_the_plans_table_holds_what_the_engine_pool_holds(model, engine, whole, reads_whole):
    from app.common import make_query
    from kvcore.query import answer

    ctx, seqs = 32768, 2
    spec = load_model(model)
    data = answer(make_query(spec, context=ctx, sequences=seqs, engine=engine, gpu="h200"))
    sliding = [g for g in data["breakdown"] if g["kind"] == "sliding"]
    assert sliding and all(g["tokens_per_sequence"] == (ctx if whole else
                                                         min(ctx, g_.window))
                           for g, g_ in zip(sliding, [x for x in spec.groups
                                                      if x.kind.value == "sliding"],
                                            strict=True))
    assert all(("kept whole" in g["description"]) == whole for g in sliding)
    per_token = sum(x.count * x.n_kv_heads * (x.head_dim_k + x.head_dim_v) * 2
                    for x in spec.groups if x.kind.is_attention)
    if whole:
        assert data["kv_bytes"] == per_token * ctx * seqs
    if engine == "trtllm":
        assert data["engine_report"]["extra"]["bytes_per_token"] == per_token
    read = data["decode"]["kv_share"] * data["decode"]["bytes_per_step"]
    if reads_whole:
        assert read == pytest.approx(data["kv_bytes"], rel=1e-9)
    else:
        assert read < per_token * ctx * seqs * 0.9


def test_swa_full_keeps_the_whole_context_in_the_table_and_over_several_cards():
    from app.common import make_query
    from kvcore.engines import EngineSettings
    from kvcore.query import answer

    spec = load_model("gemma-3-27b-it")
    ctx = 32768

    def sliding(**kw):
        data = answer(make_query(spec, context=ctx, sequences=1, engine="llama.cpp",
                                 weights="q4_k_m", **kw))
        return data, next(g for g in data["breakdown"] if g["kind"] == "sliding")

    data, g = sliding(gpu="4090")
    assert g["tokens_per_sequence"] == 1024
    full, g = sliding(gpu="4090", settings=EngineSettings(swa_full=True))
    assert g["tokens_per_sequence"] == ctx
    assert g["k_bytes"] == 52 * 16 * 128 * 2 * ctx
    assert full["kv_bytes"] > data["kv_bytes"]
    # over two cards (layers split) the decode reads each card's whole-context share
    two, _ = sliding(gpu="4090", gpus=2, settings=EngineSettings(swa_full=True))
    one, _ = sliding(gpu="4090", gpus=2)
    kv = [d["decode"]["kv_share"] * d["decode"]["bytes_per_step"] for d in (two, one)]
    assert kv[0] == pytest.approx(full["kv_bytes"], rel=1e-6)
    assert kv[1] == pytest.approx(data["kv_bytes"], rel=1e-6)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_servers_load_a_float32_checkpoint_in_16_bits(engine):
    # gemma-2-9b ships float32 weights; --dtype auto serves them in 16 bits
    spec = load_model("gemma-2-9b")
    assert spec.dtype == "float32"
    r = engine_plan(engine, req("gemma-2-9b"))
    assert r.extra["weights"] == "bf16"
    assert r.weights_bytes == pytest.approx(spec.params.total * 2, rel=0.01)
    # asked for explicitly, float32 stays
    r32 = engine_plan(engine, req("gemma-2-9b", weights="f32"))
    assert r32.weights_bytes == pytest.approx(spec.params.total * 4, rel=0.01)
    assert engine_plan("raw", req("gemma-2-9b")).extra["weights"] == "f32"


@pytest.mark.parametrize(("model", "engine"), [
    ("llama-3.2-11b-vision-instruct", "vllm"), ("minimax-m1-80k", "vllm"),
    ("minimax-m1-80k", "sglang")])
def test_engines_refuse_architectures_they_cannot_load(model, engine):
    # vLLM dropped Mllama (0.10.2) and MiniMax-M1 (0.23.0) from its registry; SGLang never
    # merged lightning attention: a plan used to be invented for each
    with pytest.raises(InputError, match="does not run"):
        engine_plan(engine, req(model, gpu="h200"))


def test_sglang_still_plans_mllama():
    assert engine_plan("sglang", req("llama-3.2-11b-vision-instruct", gpu="h200")).fits


def test_vllm_nemotron_h_state_in_float32_and_cache_mode_align():
    # vLLM keeps Nemotron-H's SSM state in float32 (NemotronHForCausalLMConfig): a
    # 16,900,096 B state page. 0.33.0 has no mamba_cache_mode "all" (MambaCacheMode is
    # "align" | "none"; MambaModelConfig sets "align" under prefix caching), so the block is
    # the smallest multiple of the default 64 whose 4,096 B a token hold the state:
    # 64 × cdiv(16,900,096, 64 × 4,096) = 4,160 tokens (16 × 258 = 4,128 at 0.33.0's 16-token
    # default), and a request keeps 3 state pages a
    # Mamba group: align mode's two and the prefill checkpoint every MambaMixer2 exports
    # (releases with "all" mode: 4,224-token blocks, a state page a block)
    spec = load_model("nemotron-h-56b-base-8k")
    state = next(g for g in spec.groups if g.kind.is_recurrent)
    page = state.conv_state_values * 2 + (state.state_values - state.conv_state_values) * 4
    assert page == 16_900_096
    r = engine_plan("vllm", req("nemotron-h-56b-base-8k", gpu="h200"))
    assert r.block_tokens == 4160 and r.extra["page_bytes"] == 4160 * 4096
    # 10 attention : 54 Mamba layers: groups of 10 (one attention, cdiv(54, 10) = 6 Mamba);
    # an 8K request holds cdiv(8192, 4160) = 2 attention blocks + 6 × 3 state pages
    assert r.extra["group_size"] == 10 and len(r.extra["groups"]) == 7
    assert r.blocks == committed(r, 4160 * 4096, 10)
    assert r.max_concurrency == r.blocks / 20
    assert r.kv_tokens == int(r.blocks / 20 * 8192)
    assert any("checkpoint its Mamba2 layers (MambaMixer2)" in n for n in r.notes)
    # speculative decoding adds a state page a draft token
    spec_pool = vllm.pool(spec, 20 * GiB, F16, F16, 16, spec_tokens=2)
    assert all(g.pages_for(3 * 4128, 8192, 0, 2) == 5 for g in spec_pool.groups if g.state)
    # Mamba1's MambaMixer (Jamba) exports no checkpoint: align mode's two pages
    jamba_cfg = {"model_type": "jamba", "num_hidden_layers": 16, "hidden_size": 64,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
                 "intermediate_size": 128, "attn_layer_period": 8, "attn_layer_offset": 4,
                 "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2}
    jamba = vllm.pool(spec_from_config(jamba_cfg, name="j", source="test"), 20 * GiB, F16,
                      F16, 16)
    assert {g.pages_for(8192, 8192, 0) for g in jamba.groups if g.state} == {2}
    assert spec_pool.min_block == 4128


def _catalog_config(name):
    import json
    from pathlib import Path

    import kvcore
    path = Path(kvcore.__file__).parent / "data" / "models" / f"{name}.json"
    return json.loads(path.read_text())


def test_sglang_ssm_state_follows_the_configs_mamba_ssm_dtype():
    # configs/mamba_utils.py mamba2_state_dtype: the config's mamba_ssm_dtype, else float32.
    # Qwen3.5-27B with its state pinned to bfloat16: 48 GDN layers × (conv 3 × 10,240 +
    # 48 × 128 × 128 delta state) × 2 B, not the float32 price
    cfg = _catalog_config("qwen3.5-27b")
    cfg["text_config"]["mamba_ssm_dtype"] = "bfloat16"
    spec = load_model(cfg)
    g = next(g for g in spec.groups if g.kind == "linear")
    per_req = g.count * g.state_values * 2
    r = engine_plan("sglang", EngineRequest(spec=spec, context=8192,
                                            cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                            kv_budget_bytes=19 * GiB))
    # less the pool's padding slot (0.5.23 _handle_max_mamba_cache)
    assert r.extra["mamba_slots"] == int(19 * GiB * 0.9 / 1.9) // per_req - 1
    # without a pinned dtype the state stays float32
    del cfg["text_config"]["mamba_ssm_dtype"]
    assert load_model(cfg).ssm_pinned_bytes == 0


@pytest.mark.parametrize("model, per_request", [("qwen3.5-27b", 5), ("nemotron-h-56b-base-8k", 5),
                                                ("lfm2.5-vl-1.6b", 3)])
def test_sglang_extra_buffer_reserves_five_slots_a_request(model, per_request):
    # mamba_radix_cache_strategy "auto" picks extra_buffer for the architectures that support
    # it while the overlap scheduler is on (arg_groups/overrides.py); each running request
    # then holds 3 + 2 ping-pong slots (_calculate_mamba_ratio), LFM2 (no_buffer) 3
    r = engine_plan("sglang", req(model, ctx=4096, gpu=None, kv_budget_bytes=19 * GiB))
    slots = r.extra["mamba_slots"]
    assert r.max_sequences == min(r.kv_tokens // 4096, slots // per_request)
    assert sglang.slots_per_request(load_model(model).model_type) == per_request


def test_sglang_extra_buffer_keeps_one_track_slot_under_pipeline_parallelism():
    # 0.5.23 resolves the strategy to extra_buffer in handle_model_specific_adjustments, with
    # the overlap scheduler still on; _pipeline_parallel_overlap_disable turns it off later in
    # the pipeline and nothing resolves the strategy again, so _calculate_mamba_ratio gives
    # 3 + get_mamba_tracking_slots(extra_buffer, overlap=False) = 3 + 1 slots a request.
    # Qwen3.5-27B at --pp 2: a stage holds 24 GDN layers, a slot 24 × (3 × 10,240 × 2 +
    # 48 × 128 × 128 × 4) = 76,972,032 B; 19 GiB × 0.9 / 1.9 = 9 GiB holds
    # (9,663,676,416 − 76,972,032) // 76,972,032 = 124 slots, 124 // 4 = 31 requests (not 24)
    r = engine_plan("sglang", req("qwen3.5-27b", ctx=4096, gpu=None, kv_budget_bytes=19 * GiB,
                                  parallel=Parallel(pp=2)))
    assert r.extra["mamba_slots"] == 124
    # the KV pool: 19 GiB less 125 slots, 8 full layers × 4 heads × 256 × 2 × 2 B a token
    assert r.kv_tokens == (20_401_094_656 - 125 * 76_972_032) // 32_768 == 328_967
    assert r.max_sequences == 31
    assert any("(4 slots a request)" in n for n in r.notes)
    assert sglang.slots_per_request("qwen3_5_text", pp=2) == 4
    assert sglang.slots_per_request("kimi_linear", pp=4) == 4
    # no_buffer (LFM2) keeps 3, and without --pp extra_buffer keeps its ping-pong pair
    assert sglang.slots_per_request("lfm2_vl", pp=2) == 3
    assert sglang.slots_per_request("qwen3_5_text") == 5


def test_vllm_nemotron_h_reads_mamba_ssm_cache_dtype():
    # NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype: the config's
    # mamba_ssm_cache_dtype, else float32. Pinned to bfloat16 the state page halves its
    # SSM part: 54 layers' worth per page is per layer, so one layer's page is
    # 3 × 20,480 × 2 + 256 × 64 × 256 × 2 B
    cfg = _catalog_config("nemotron-h-56b-base-8k")
    cfg["mamba_ssm_cache_dtype"] = "bfloat16"
    spec = load_model(cfg)
    assert spec.ssm_cache_dtype_bytes == 2
    page16 = 3 * 20480 * 2 + 256 * 64 * 256 * 2
    page32 = 3 * 20480 * 2 + 256 * 64 * 256 * 4
    state = next(s for s in vllm._specs(spec, F16, F16, 16, False) if s.state)
    default = next(s for s in vllm._specs(load_model("nemotron-h-56b-base-8k"), F16, F16, 16,
                                          False) if s.state)
    assert state.page >= page16 and state.page < page32 <= default.page


def test_trtllm_state_reads_mamba_ssm_cache_dtype():
    # MambaKVCacheParams: SSM state in the config's mamba_ssm_cache_dtype, else model dtype
    from kvcore.engines import trtllm
    cfg = _catalog_config("nemotron-h-56b-base-8k")
    assert trtllm.state_bytes_per_slot(load_model(cfg)) == 54 * (3 * 20480 + 256 * 64 * 256) * 2
    cfg["mamba_ssm_cache_dtype"] = "float32"
    assert trtllm.state_bytes_per_slot(load_model(cfg)) == 54 * (3 * 20480 * 2
                                                                 + 256 * 64 * 256 * 4)


@pytest.mark.parametrize("block", [3, 8, 24])
def test_vllm_refuses_a_block_size_no_attention_backend_takes(block):
    # vllm/config/cache.py accepts any block_size > 0; backend selection then finds no CUDA
    # attention backend ("block_size not supported"): FlashAttention takes multiples of 16
    with pytest.raises(InputError, match="multiple of 16") as err:
        engine_plan("vllm", req("llama-3.1-8b", settings=EngineSettings(block_size=block)))
    assert err.value.field == "block_size"


# --- DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5) -----------------------------------------
# vLLM (vllm-project/vllm): models/deepseek_v2.py Indexer keeps its keys in a uint8 cache of
# index_head_dim + index_head_dim // 128 × 4 = 132 bytes a token (fp8 values, an fp32 scale
# per 128); mla/flashmla_sparse.py: fp8_ds_mla is 512 fp8 + 4 fp32 scales + 64 bf16 = 656
# bytes a token, the bf16 latent 576 × 2 = 1152; platforms/cuda.py forces 64-token blocks;
# kv_cache_interface.py UniformTypeKVCacheSpecs: one group, a block is the sum of every
# layer's page.

@pytest.mark.parametrize("model,kv,per_token", [
    ("deepseek-v3.2", "f16", 61 * 1152 + 61 * 132),   # 78,324
    ("deepseek-v3.2", "fp8", 61 * 656 + 61 * 132),    # 48,068
    ("glm-5", "fp8", 78 * 656 + 78 * 132),            # 61,464
    ("glm-5.2", "f16", 78 * 1152 + 21 * 132),         # 92,628
    ("glm-5.2", "fp8", 78 * 656 + 21 * 132),          # 53,940
])
def test_vllm_dsa_pool_holds_latent_and_indexer_keys(model, kv, per_token):
    r = engine_plan("vllm", req(model, ctx=10000, kv=kv, gpu="h200", weights="fp8",
                                parallel=Parallel(tp=8)))
    assert r.block_tokens == 64
    # the latent's and the indexer's regions (at most two a layer, 78 layers at most), each in
    # whole 2 MiB granules
    assert granule_bounded(r, 64 * per_token, 2 * 78)
    # a 10,000-token request holds cdiv(10000, 64) = 157 blocks
    assert r.max_concurrency == r.blocks / 157
    assert r.log_lines[-2] == (f"GPU KV cache size: {int(r.blocks / 157 * 10000):,} tokens, "
                               f"Maximum concurrency for 10,000 tokens per request: "
                               f"{r.blocks / 157:.2f}x")
    assert r.log_lines[-1].startswith(f"Extended KV cache to {r.blocks} blocks (")
    assert f"{per_token:,} bytes a token per rank" in " ".join(r.notes)


def test_vllm_dsa_blocks_are_multiples_of_64():
    # 0.33.0 no longer forces 64 in platforms/cuda.py: the backends prefer it (the indexer's
    # kernel block is 64, the sparse MLA backends take MultipleOf(64)). A --block-size of 128
    # is taken (a 10,000-token request: cdiv(10000, 128) = 79 blocks); 16 leaves the indexer
    # no backend
    r = engine_plan("vllm", req("deepseek-v3.2", kv="fp8", gpu="h200", weights="fp8",
                                parallel=Parallel(tp=8), ctx=10000))
    assert r.block_tokens == 64 and "--block-size" not in r.command
    assert granule_bounded(r, 64 * 61 * (656 + 132), 2 * 61)
    r = engine_plan("vllm", req("deepseek-v3.2", kv="fp8", gpu="h200", weights="fp8",
                                parallel=Parallel(tp=8), ctx=10000,
                                settings=EngineSettings(block_size=128)))
    assert r.block_tokens == 128 and "--block-size 128" in r.command
    assert granule_bounded(r, 128 * 61 * (656 + 132), 2 * 61)
    assert r.max_concurrency == r.blocks / 79
    with pytest.raises(InputError, match="multiple of 64") as err:
        engine_plan("vllm", req("deepseek-v3.2", kv="fp8", gpu="h200", weights="fp8",
                                parallel=Parallel(tp=8), settings=EngineSettings(block_size=16)))
    assert err.value.field == "block_size"


@pytest.mark.parametrize("kv,gpu,field", [
    ("fp8_e5m2", "h200", "kv_k"),   # not a sparse-MLA cache dtype
    ("fp8", "b200", "kv_k"),        # Blackwell may pick FLASHINFER_MLA_SPARSE (plain fp8)
    ("f16", "a100", "gpu"),         # no sparse MLA backend before Hopper
])
def test_vllm_dsa_refusals(kv, gpu, field):
    with pytest.raises(InputError) as e:
        engine_plan("vllm", req("glm-5", kv=kv, gpu=gpu, parallel=Parallel(tp=8)))
    assert e.value.field == field and "\n" not in str(e.value)


def test_vllm_dsa_bf16_on_blackwell_is_sized():
    r = engine_plan("vllm", req("glm-5.1", kv="f16", gpu="b200", weights="fp8",
                                parallel=Parallel(tp=8)))
    assert r.blocks > 0
    assert granule_bounded(r, 64 * 78 * (1152 + 132), 2 * 78)


@pytest.mark.parametrize("model,indexer", [("deepseek-v3.2", 61), ("glm-5", 78),
                                           ("glm-5.1", 78), ("glm-5.2", 21)])
def test_llamacpp_sizes_dsa_indexer_keys(model, indexer):
    # llama-kv-cache-dsa @3f545bec: the latent in the decoder's layers, then a K-only cache of
    # 128-value indexer keys in the -ctk type in the layers that run their own indexer
    # (tests/test_llamacpp_sparse.py works the lines by hand)
    layers = 61 if model == "deepseek-v3.2" else 78
    for kv, lat, key in (("f16", 1152, 256), ("q8_0", 612, 136)):
        r = engine_plan("llama.cpp", req(model, kv=kv, gpu=None, kv_budget_bytes=64 * GiB))
        assert r.extra["kv_bytes"] == (layers * lat + indexer * key) * 8192
        assert f"{indexer:3d} layers" in r.log_lines[3] and f"{layers:3d} layers" in r.log_lines[1]
    # the dense MLA model it sizes as before
    engine_plan("llama.cpp", req("deepseek-v3", gpu=None, kv_budget_bytes=8 * GiB))


# SGLang (sgl-project/sglang): the NSA/DSA pool (mem_cache/memory_pool.py NSATokenToKVPool,
# later DSATokenToKVPool) holds tokens + 64 latent rows per layer and (tokens + 64 + 1) // 64
# pages of 64 × 132 indexer bytes per layer, every layer (shared-indexer ones too); the latent
# row is 576 × 2 = 1,152 B in bfloat16 and, under fp8_e4m3 with a FlashMLA backend,
# 512 + 512 // 128 × 4 + 64 × 2 = 656 B (calculate_mla_kv_cache_dim). The profiler's cell
# (get_cell_size_per_token / pool_configurator.py _compute_cell_size) counts 576 × dtype bytes
# + 132 per layer. Pages are forced to 64.

def test_sglang_dsa_pool_bytes_match_real_logs():
    # DeepSeek-V3.2-Exp on B200 (fp8, FlashMLA), PR #11309 branch: "#tokens: 975424, KV size:
    # 43.67 GB" = 61 × ((975,424 + 64) × 656 + 15,242 pages × 64 × 132) / 2^30
    assert f"{sglang.dsa_pool_bytes(975424, 61, 656) / GiB:.2f}" == "43.67"
    # main before the PR printed the latent only: 61 × 1,462,848 × 656 / 2^30 = 54.52 GB; the
    # author's figure with the indexer keys is 65.49 GB
    assert f"{61 * (1462784 + 64) * 656 / GiB:.2f}" == "54.52"
    assert f"{sglang.dsa_pool_bytes(1462784, 61, 656) / GiB:.2f}" == "65.49"


@pytest.mark.parametrize("model,kv,gpu,cell,row,flag,indexers", [
    # H200 (sm90), auto → bfloat16: 61 × (1,152 + 132) = 78,324
    ("deepseek-v3.2", "f16", "h200", 61 * (576 * 2 + 132), 1152, None, 61),
    # H200, fp8_e4m3: 0.5.23's cell counts the row the pool allocates,
    # calculate_mla_kv_cache_dim's 656 bytes (FlashMLA): 61 × (656 + 132) = 48,068
    ("deepseek-v3.2", "fp8", "h200", 61 * (656 + 132), 656, "fp8_e4m3", 61),
    # GLM-5.2: its 57 "shared" layers reuse another's top-k and get a 0-row index buffer
    # (index_key_cache.py _layer_num_pages; the profile's cell likewise,
    # _compute_dsa_indexer_cell_size): 78 × 1,152 + 21 × 132 = 92,628
    ("glm-5.2", "bf16", "b200", 78 * 1152 + 21 * 132, 1152, "bfloat16", 21),
    ("glm-5", "bf16", None, 78 * (1152 + 132), 1152, "bfloat16", 78),
])
def test_sglang_dsa_cell_and_pool(model, kv, gpu, cell, row, flag, indexers):
    budget = {"kv_budget_bytes": 40 * GiB} if gpu is None else {}
    r = engine_plan("sglang", req(model, kv=kv, gpu=gpu, weights="fp8",
                                  parallel=Parallel(tp=8), **budget))
    assert r.extra["cell_bytes"] == cell and r.block_tokens == 64
    tokens = r.kv_pool_bytes // cell // 64 * 64
    assert r.kv_tokens == tokens and r.blocks == tokens // 64
    layers = 61 if model == "deepseek-v3.2" else 78
    pool = layers * (tokens + 64) * row + indexers * (tokens + 65) // 64 * 64 * 132
    # the pool's dtype: auto is bfloat16 below SM100 (and --kv bf16 passes bfloat16)
    dtype = "float8_e4m3fn" if flag == "fp8_e4m3" else "bfloat16"
    assert (f"KV Cache is allocated. dtype: torch.{dtype}, #tokens: {tokens}, KV size: "
            f"{pool / GiB:.2f} GB" in r.log_lines)
    assert (f"--kv-cache-dtype {flag}" in r.command) == (flag is not None)


def test_sglang_dsa_forces_64_token_pages():
    r = engine_plan("sglang", req("glm-5.1", kv="bf16", gpu=None, kv_budget_bytes=40 * GiB,
                                  settings=EngineSettings(page_size=16)))
    assert r.block_tokens == 64 and "--page-size 16 is ignored" in " ".join(r.notes)


@pytest.mark.parametrize("kv,gpu,field", [
    ("f16", "b200", "kv_k"),        # auto is fp8_e4m3 from SM100, whose row changed by release
    ("fp8", "b200", "kv_k"),        # 656 B (FlashMLA, older) or 576 B (trtllm, newer)
    ("fp8_e5m2", "h200", "kv_k"),   # DSA takes bfloat16 or fp8_e4m3 only
    ("bf16", "a100", "gpu"),        # no NSA kernels before Hopper here
    ("f16", None, "gpu"),           # auto depends on the card
])
def test_sglang_dsa_refusals(kv, gpu, field):
    budget = {"kv_budget_bytes": 40 * GiB} if gpu is None else {}
    with pytest.raises(InputError) as e:
        engine_plan("sglang", req("deepseek-v3.2", kv=kv, gpu=gpu, parallel=Parallel(tp=8),
                                  **budget))
    assert e.value.field == field and "\n" not in str(e.value)


# TensorRT-LLM (NVIDIA/TensorRT-LLM): attention_backend/sparse/dsa/cache_manager.py
# DSACacheManager.get_cache_size_per_token: the MLA latent (kv_lora_rank 512 + rope 64 = 576
# values) at 2 B (auto, a bf16 model) or 1 B (fp8 KV) in every attention layer, plus an fp8
# indexer key of index_head_dim 128 + 128 // 128 × 4 scale bytes = 132 B in each layer that
# runs an indexer (llm_args.py _is_full_indexer_layer: GLM-5.2's index_topk_freq 4 / offset 3
# give 21 of 78); one latent per rank whatever tp is.
@pytest.mark.parametrize("model,kv,per_token", [
    ("deepseek-v3.2", "f16", 61 * 576 * 2 + 61 * 132),   # 70,272 + 8,052 = 78,324
    ("deepseek-v3.2", "fp8", 61 * 576 * 1 + 61 * 132),   # 35,136 + 8,052 = 43,188
    ("glm-5", "fp8", 78 * 576 + 78 * 132),               # 44,928 + 10,296 = 55,224
    ("glm-5.1", "bf16", 78 * 1152 + 78 * 132),           # 89,856 + 10,296 = 100,152
    ("glm-5.2", "f16", 78 * 1152 + 21 * 132),            # 89,856 + 2,772 = 92,628
    ("glm-5.2", "fp8", 78 * 576 + 21 * 132),             # 44,928 + 2,772 = 47,700
])
def test_trtllm_dsa_bytes_per_token(model, kv, per_token):
    for tp in (1, 8):
        r = engine_plan("trtllm", req(model, kv=kv, gpu=None, kv_budget_bytes=8 * GiB,
                                      parallel=Parallel(tp=tp)))
        assert r.extra["bytes_per_token"] == per_token
        # the pool's tokens: budget // bytes a token, rounded up to whole 64-token blocks
        # (a DSA model's default: DeepGEMM's paged indexer kernel takes 64 on sm90)
        tokens = -(-(8 * GiB // per_token) // 64) * 64
        assert r.kv_tokens == tokens and r.blocks == tokens // 64
        assert r.log_lines == ("Number of tokens per block: 64.",)
        assert f"{per_token:,} bytes a token per rank" in " ".join(r.notes)


def test_trtllm_dsa_pipeline_stages_own_their_indexers():
    # mapping.py pp_layers: 78 layers over 2 stages are 0-38 and 39-77; GLM-5.2's indexer
    # layers 0, 1, 2, 6, ..., 38 (12) sit on the first, 42, ..., 74 (9) on the second
    r = engine_plan("trtllm", req("glm-5.2", kv="fp8", gpu=None, kv_budget_bytes=8 * GiB,
                                  parallel=Parallel(pp=2)))
    first, second = 39 * 576 + 12 * 132, 39 * 576 + 9 * 132   # 24,048 and 23,652
    assert r.binding_stage == 0 and r.extra["bytes_per_token"] == first
    assert r.kv_tokens == -(-(8 * GiB // first) // 64) * 64
    assert first > second


@pytest.mark.parametrize("gpu,block,field", [
    ("h200", 32, "tokens_per_block"),   # DeepGEMM's sm90 paged MQA-logits kernel: 64 only
    ("b200", 128, "tokens_per_block"),  # sm100: 32 or 64
    ("a100", None, "gpu"),              # no sparse MLA kernels before Hopper
    ("rtx pro 6000", None, "gpu"),      # sm120's fp8_ds_mla path is not modeled
])
def test_trtllm_dsa_refuses_blocks_and_cards_its_kernels_do_not_take(gpu, block, field):
    with pytest.raises(InputError) as e:
        engine_plan("trtllm", req("glm-5", kv="fp8", gpu=gpu, parallel=Parallel(tp=8),
                                  settings=EngineSettings(tokens_per_block=block)))
    assert e.value.field == field and "\n" not in str(e.value)


def test_trtllm_dsa_takes_32_token_blocks_on_blackwell():
    r = engine_plan("trtllm", req("glm-5", kv="fp8", gpu="b200", weights="fp8",
                                  parallel=Parallel(tp=8),
                                  settings=EngineSettings(tokens_per_block=32)))
    assert r.block_tokens == 32 and r.kv_tokens % 32 == 0


@pytest.mark.parametrize("kv,says", [("nvfp4", "not nvfp4"), ("q8_0", "no q8_0")])
def test_trtllm_dsa_refuses_unsized_latents(kv, says):
    with pytest.raises(InputError) as e:
        engine_plan("trtllm", req("deepseek-v3.2", kv=kv, gpu="h200", parallel=Parallel(tp=8)))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_trtllm_dsa_refuses_a_shared_first_layer():
    # llm_args.py _is_full_indexer_layer forces layer 0 to run an indexer; a config sharing
    # it is laid out differently from kvplan's (vLLM's) reading
    cfg = _catalog_config("glm-5")
    cfg["index_topk_pattern"] = "SF" * 39
    with pytest.raises(InputError, match="layer 0") as e:
        engine_plan("trtllm", EngineRequest(spec=load_model(cfg), context=8192, sequences=1,
                                            cache=CacheOptions(kv_k="fp8", kv_v="fp8"),
                                            kv_budget_bytes=8 * GiB))
    assert e.value.field == "engine"


def test_dsa_indexer_key_is_replicated_on_every_tp_rank():
    spec = load_model("glm-5.2")
    for tp in (1, 8):
        g = next(g for g in rank_spec(spec, Parallel(tp=tp)).groups if g.kind == "indexer")
        assert (g.n_kv_heads, g.head_dim_k, g.count) == (1, 128, 21)
# --- Nemotron 3 (nemotron_h with latent MoE) and Nemotron-NAS (DeciLM) ---------------------

def test_nemotron3_nano_state_pages_per_engine():
    # 23 Mamba-2 layers: conv 3 × (4096 + 2·8·128) = 18,432 values in the model dtype (bf16),
    # SSM 64 heads × 64 × 128 = 524,288 values in mamba_ssm_cache_dtype (float32)
    conv, ssm = 3 * 6144, 64 * 64 * 128
    spec = load_model("nemotron-3-nano-30b-a3b")
    assert spec.ssm_cache_dtype_bytes == 4
    # vLLM: a state page of 36,864 + 2,097,152 = 2,134,016 B; 6 attention layers of
    # 2 KV heads × 256 × 2 B = 1,024 B a token each; mamba_cache_mode "align" makes the block
    # the smallest multiple of the default block (64 in 0.34.0; 16 before) holding a page:
    # 64 × cdiv(2,134,016, 64 × 1,024) = 2,112 (0.33.0: 16 × 131 = 2,096)
    r = engine_plan("vllm", req("nemotron-3-nano-30b-a3b", gpu="h200"))
    assert r.block_tokens == 2112 and r.extra["page_bytes"] == 2112 * 1024
    old = engine_plan("vllm", req("nemotron-3-nano-30b-a3b", gpu="h200",
                                  settings=EngineSettings(block_size=16)))
    assert old.block_tokens == 2096
    # TensorRT-LLM: conv in the model dtype, SSM in mamba_ssm_cache_dtype, per slot
    from kvcore.engines import trtllm
    assert trtllm.state_bytes_per_slot(spec) == 23 * (conv * 2 + ssm * 4)
    # llama.cpp: R and S in f32, one cell a sequence
    r = engine_plan("llama.cpp", req("nemotron-3-nano-30b-a3b", ctx=131072, gpu="h200"))
    assert r.extra["state_bytes"] == 23 * (conv + ssm) * 4
    assert r.extra["kv_bytes"] == 6 * 2 * 256 * 2 * 131072


def test_nemotron3_super_tp8_vllm_block():
    # tp 8: 16 of the 128 Mamba heads and 1 of the 8 groups a rank; SSM 16 × 64 × 128 × 4 B +
    # conv 3 × (1024 + 2·128) × 2 B = 531,968 B; the 2 KV heads replicate to 1 a rank:
    # 256 × 2 B = 512 B a token a layer; 64 × cdiv(531,968, 64 × 512) = 1,088 tokens (0.33.0's
    # 16-token default: 16 × 65 = 1,040)
    r = engine_plan("vllm", req("nemotron-3-super-120b-a12b", gpu="h200",
                                parallel=Parallel(tp=8)))
    assert r.block_tokens == 17 * 64


def test_nemotron3_mtp_attention_is_cached_with_mtp_only():
    # Super's MTP step "*E": one more attention layer of 2 KV heads × 256 × 2 B
    spec = load_model("nemotron-3-super-120b-a12b")
    from kvcore import bytes_per_token
    assert bytes_per_token(spec) == 8 * 1024
    assert bytes_per_token(spec, CacheOptions(mtp=True)) == 9 * 1024
    r = engine_plan("llama.cpp", EngineRequest(
        spec=spec, context=8192, cache=CacheOptions(kv_k="f16", kv_v="f16", mtp=True),
        kv_budget_bytes=100 * GiB))
    assert r.extra["kv_bytes"] == 9 * 1024 * 8192


NAS = "llama-3.3-nemotron-super-49b"


def test_nemotron_nas_vllm_caches_only_attention_layers():
    # DeciLMForCausalLM builds attention in 49 of 80 layers: a 16-token page of
    # 49 × 8 KV heads × 256 × 2 B
    pool = vllm.pool(load_model(NAS), 10 * GiB, F16, F16, 16)
    assert pool.num_blocks == 10 * GiB // (16 * 49 * 8 * 256 * 2)
    assert engine_plan("vllm", req(NAS, gpu="h200")).kv_tokens > 0


def test_nemotron_nas_llamacpp_zero_width_layers_and_v_padding():
    # deci: all 80 layers get K/V tensors, the 31 no-op ones 0 heads wide; 32,768 cells of
    # 49 × 8 × 128 × 2 B for K and as much for V (3,136 MiB each)
    r = engine_plan("llama.cpp", req(NAS, ctx=32768, gpu="h200"))
    assert r.extra["k_bytes"] == r.extra["v_bytes"] == 49 * 1024 * 2 * 32768
    assert any("( 32768 cells,  80 layers,  1/1 seqs), K (f16): 3136.00 MiB" in line
               for line in r.log_lines)
    # -fa off: V is transposed and every layer's V padded to the widest (8 × 128)
    off = engine_plan("llama.cpp", req(NAS, ctx=32768, gpu="h200",
                                       settings=EngineSettings(flash_attn=False)))
    assert off.extra["k_bytes"] == 49 * 1024 * 2 * 32768
    assert off.extra["v_bytes"] == 80 * 1024 * 2 * 32768
    with pytest.raises(InputError, match="not modelled"):
        engine_plan("llama.cpp", req(NAS, gpu=None, kv_budget_bytes=10 * GiB,
                                     parallel=Parallel(pp=2)))


def test_nemotron_nas_refused_where_the_layout_is_not_established():
    with pytest.raises(InputError, match="does not size Nemotron-NAS") as err:
        engine_plan("trtllm", req(NAS, gpu="h200"))
    assert err.value.field == "engine"


def test_nemotron_nas_sglang_pool_spans_every_decoder_layer():
    # SGLang's DeciLMForCausalLM builds all 80 layers (make_pp_layers), and the token pool
    # spans num_effective_layers = 80, the 31 no-op attention layers included, each with
    # get_total_num_kv_heads' 8 heads: 80 × 8 × (128 + 128) × 2 B = 327,680 B a token
    budget = 10 * GiB
    r = engine_plan("sglang", req(NAS, gpu=None, kv_budget_bytes=budget))
    assert r.kv_tokens == budget // (80 * 8 * 256 * 2) == 32_768
    assert r.extra["cell_bytes"] == 327_680
    assert any("31 decoder layers whose attention is a no-op" in n for n in r.notes)
    # tp 8: one KV head a rank, 80 × 1 × 256 × 2 B
    r8 = engine_plan("sglang", req(NAS, gpu=None, kv_budget_bytes=budget,
                                   parallel=Parallel(tp=8)))
    assert r8.extra["cell_bytes"] == 80 * 256 * 2


def _nas_variant(change):
    cfg = _catalog_config(NAS)
    change(cfg["block_configs"][0]["attention"])
    return load_model(cfg)


def test_nemotron_nas_variants_vllm_refuses():
    # a layer of 64 // 16 = 4 KV heads beside 8-head ones: vLLM's layout for that is not
    # established; llama.cpp gives each layer its own width
    mixed = _nas_variant(lambda a: a.update(n_heads_in_group=16))
    with pytest.raises(InputError, match="different KV head counts \\(4, 8\\)"):
        engine_plan("vllm", EngineRequest(spec=mixed, context=8192,
                                          cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                          kv_budget_bytes=10 * GiB))
    r = engine_plan("llama.cpp", EngineRequest(spec=mixed, context=8192,
                                               cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                               kv_budget_bytes=10 * GiB))
    assert r.extra["k_bytes"] == (48 * 8 + 4) * 128 * 2 * 8192
    # attention replaced by a projection: vLLM's DeciLMDecoderLayer builds no such layer
    linear = _nas_variant(lambda a: a.update(replace_with_linear=True, n_heads_in_group=None))
    with pytest.raises(InputError, match="replace_with_linear, 1 layers"):
        engine_plan("vllm", EngineRequest(spec=linear, context=8192,
                                          cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                          kv_budget_bytes=10 * GiB))
    # SGLang: get_total_num_kv_heads raises on variable GQA, and its decoder layer builds
    # attention from n_heads_in_group only
    for spec, words in ((mixed, "different KV head counts"), (linear, "replace_with_linear")):
        with pytest.raises(InputError, match=words):
            engine_plan("sglang", EngineRequest(spec=spec, context=8192,
                                                cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                                kv_budget_bytes=10 * GiB))
# --- Gemma 4, MiMo-V2, Kimi-K3, Step-3.7 ------------------------------------------------------

def test_vllm_gemma4_pages_per_kind():
    pool = vllm.pool(load_model("gemma-4-26b-a4b"), 10 * GiB, F16, F16, 16)
    # sliding: 16 tokens × 8 heads × (256 + 256) × 2 B = 131,072 B a page; full: 2 heads ×
    # (512 + 512) × 2 B = 4,096 B a token, so its block grows to 32 tokens for the same page
    assert pool.page == 131072
    assert sorted({(g.kind, g.block) for g in pool.groups}) == [("full", 32), ("sliding", 16)]
    # 5 full : 25 sliding layers: groups of 5, one full and five sliding
    assert pool.group_size == 5 and len(pool.groups) == 6
    assert pool.num_blocks == 10 * GiB // 131072 // 5
    # a 131,072-token request: 4,096 full blocks + 5 × (cdiv(1023 + 8192, 16) + 1)
    assert pool.blocks_per_request(131072, 8192, 0) == 4096 + 5 * (576 + 1)


def test_vllm_gemma4_pads_per_token_head_global_heads():
    fmt = get_format("fp8_pth")
    pool = vllm.pool(load_model("gemma-4-26b-a4b"), 10 * GiB, fmt, fmt, 16)
    # local head: 2 × (256 + 4) = 520 B; global head 2 × (512 + 4) = 1,032 B padded to 1,040
    # (gemma4.py kv_cache_page_size_padded): pages 16 × 8 × 520 and 32 × 2 × 1,040
    assert pool.page == 16 * 8 * 520 == 32 * 2 * 1040


def test_vllm_gemma4_kv_shared_layers_take_no_pages():
    from kvcore import spec_from_config
    text = {"model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 35,
            "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
            "global_head_dim": 512, "sliding_window": 512, "vocab_size": 262144,
            "num_kv_shared_layers": 20, "intermediate_size": 6144,
            "layer_types": ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention"
                            for i in range(35)]}
    pool = vllm.pool(spec_from_config(text, name="e2b", source="t"), GiB, F16, F16, 16)
    # only layers 0..14 hold pages: 3 full (1 × 1024 × 2 B a token, block 16 → 32 KiB) and 12
    # sliding (1 × 512 × 2 B, block 32 for the same page); groups of 3
    assert pool.page == 16 * 1024 * 2
    assert pool.group_size == 3 and len(pool.groups) == 1 + 4
    assert pool.num_blocks == GiB // (16 * 1024 * 2) // 3


def test_vllm_mimo_v2_flash_pages():
    pool = vllm.pool(load_model("mimo-v2-flash"), 10 * GiB, F16, F16, 16)
    # sliding: 16 × 8 heads × (192 + 128) × 2 B = 81,920 B; full 4 heads × 320 × 2 B a token,
    # block 32 for the same page
    assert pool.page == 81920
    assert sorted({(g.kind, g.block) for g in pool.groups}) == [("full", 32), ("sliding", 16)]
    # 9 full : 39 sliding layers: groups of 9, one full and cdiv(39, 9) = 5 sliding
    assert pool.group_size == 9 and len(pool.groups) == 6
    assert pool.blocks_per_request(131072, 8192, 0) == 4096 + 5 * (-(-(127 + 8192) // 16) + 1)


def test_sglang_mimo_v2_flash_swa_pools():
    r = engine_plan("sglang", req("mimo-v2-flash", gpu=None, kv_budget_bytes=10 * GiB))
    # model_runner_kv_cache_mixin set_num_tokens_hybrid_swa: F = 9 full layers × 4 heads ×
    # (192 + 128) × 2 B, S = 39 sliding layers × 8 heads × (192 + 128) × 2 B
    full, swa = 9 * 4 * 320 * 2, 39 * 8 * 320 * 2
    tokens = int(10 * GiB / (full + 0.8 * swa))
    assert r.kv_tokens == tokens == 58743
    assert r.extra["swa_tokens"] == int(tokens * 0.8)


def test_sglang_gemma4_26b_swa_pools_take_the_global_geometry():
    r = engine_plan("sglang", req("gemma-4-26b-a4b", gpu=None, kv_budget_bytes=10 * GiB))
    # utils/hf_transformers/config.py get_config (gemma4): head_dim := global_head_dim 512,
    # num_key_value_heads := num_global_key_value_heads 2, swa_* := 256 and 8 heads; the
    # HybridSWAPoolConfigurator's F = 5 full layers × 2 × (512 + 512) × 2 B = 20,480 and
    # S = 25 sliding layers × 8 × (256 + 256) × 2 B = 204,800; cell = F + 0.8 S = 184,320;
    # 10 GiB // 184,320 = 58,254 full tokens, int(58,254 × 0.8) = 46,603 window tokens
    assert r.extra["cell_bytes"] == 20480 + 204800
    assert r.kv_tokens == 10 * GiB * 5 // (5 * 20480 + 4 * 204800) == 58254
    assert r.extra["swa_tokens"] == 46603
    # each pool holds its tokens + 1 page (page 1): K of the window pool 46,604 × 102,400 B
    # = 4.44 GiB, of the full pool 58,255 × 10,240 B = 0.56 GiB
    assert r.log_lines == (
        "Use sliding window memory pool. full_layer_tokens=58254, swa_layer_tokens=46603",
        "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 58254, K size: 0.56 GB, "
        "V size: 0.56 GB",
        "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 46603, K size: 4.44 GB, "
        "V size: 4.44 GB",
        "SWAKVPool mem usage: 10.00 GB, swa size: 46603, full size: 58254")


def test_sglang_gemma4_31b_swa_pools_and_tp_replicates_global_heads():
    r = engine_plan("sglang", req("gemma-4-31b-it", gpu=None, kv_budget_bytes=10 * GiB))
    # F = 10 full layers × 4 global heads × 1,024 × 2 B = 81,920; S = 50 × 16 × 512 × 2 B =
    # 819,200; 10 GiB / (81,920 + 0.8 × 819,200 = 737,280) = 14,563.5 → 14,563; × 0.8 → 11,650
    assert r.kv_tokens == 14563 and r.extra["swa_tokens"] == 11650
    # tp 8: max(1, 4 // 8) = 1 global head, 16 // 8 = 2 sliding heads a rank:
    # F = 10 × 1 × 1,024 × 2 = 20,480, S = 50 × 2 × 512 × 2 = 102,400, cell 102,400
    r8 = engine_plan("sglang", req("gemma-4-31b-it", gpu=None, kv_budget_bytes=10 * GiB,
                                   parallel=Parallel(tp=8)))
    assert r8.extra["cell_bytes"] == 20480 + 102400
    assert r8.kv_tokens == 10 * GiB // (20480 + 81920) == 104857


def test_sglang_refuses_gemma4_text_only_configs():
    text = spec_from_config({**_gemma4_e2b(num_kv_shared_layers=0)["text_config"],
                             "architectures": ["Gemma4ForCausalLM"]}, name="t", source="t")
    with pytest.raises(InputError, match="could not establish .*Gemma4ForCausalLM"):
        engine_plan("sglang", EngineRequest(spec=text, context=8192, cache=CacheOptions(),
                                            kv_budget_bytes=GiB))


def test_llamacpp_gemma4_caches_k_and_v_per_kind():
    mem = llamacpp.kv_bytes(load_model("gemma-4-26b-a4b"), 32768, 1, "f16", "f16")
    # 5 full layers × 2 heads × 512 over 32,768 cells; 25 sliding layers × 8 × 256 over
    # pad256(1024 + 512) = 1,536 cells; K and V both (V is the K projection, stored again)
    assert mem.kv_bytes == 2 * (5 * 2 * 512 * 32768 + 25 * 8 * 256 * 1536) * 2


def test_vllm_kimi_k3_pages_like_kimi_linear():
    spec = rank_spec(load_model("kimi-k3"), Parallel(tp=8))
    pool = vllm.pool(spec, 20 * GiB, F16, F16, 16)
    # a rank's KDA state: 12 of the 96 heads × 128 × 128 in float32 + conv 3 × (3 · 12 · 128)
    # in bf16 = 814,080 B; the MLA latent (576 × 2 B, on every rank) pages take the smallest
    # multiple of 128 tokens (an MLA hybrid's alignment) that holds it:
    # 128 × cdiv(814,080, 128 × 1,152) = 768
    state = 12 * 128 * 128 * 4 + 3 * 3 * 12 * 128 * 2
    assert state == 814080 and pool.min_block == 768
    assert pool.page == 768 * 576 * 2
    # 24 MLA : 69 KDA layers: groups of 24, one MLA and cdiv(69, 24) = 3 state groups
    assert pool.group_size == 24 and len(pool.groups) == 4
    assert pool.num_blocks == 20 * GiB // (768 * 1152) // 24


@pytest.mark.parametrize(("model", "engine", "what"), [
    ("mimo-v2-flash", "llama.cpp", "MTP blocks"),
    ("step-3.7-flash", "llama.cpp", "Step-3.7.*Step3p7FlashForCausalLM"),
])
def test_engines_refuse_layouts_not_read_from_their_source(model, engine, what):
    with pytest.raises(InputError, match=f"could not establish .*{what}") as err:
        engine_plan(engine, req(model, gpu="h200"))
    assert err.value.field == "engine"


def test_llamacpp_kimi_k3_hybrid_k_only_latent_and_kda_state():
    # LLM_ARCH_KIMI_K3 (conversion/kimi_k3.py @051139f5: n_head_kv 1 on the 24 MLA layers, 0
    # on the 69 KDA ones; key_length 512 + 64 = 576; MLA keys set, so is_mla() and the cache is
    # K only, src/models/kimi-k3.cpp @38d39068 build_inp_mem_hybrid_k)
    mem = llamacpp.kv_bytes(load_model("kimi-k3"), 65536, 2, "f16", "f16")
    # two sequences of 65,536 tokens, n_ctx 131,072: 2 streams of 65,536 cells: 24 layers × 576 × 2 B × 65,536 × 2 = 3,623,878,656 B
    assert mem.k_bytes == 3623878656 and mem.v_bytes == 0
    # R: 3 × (4 − 1) × 96 heads × 128 = 110,592 f32 values a layer and cell; S: 128 × 128 × 96
    # = 1,572,864; 69 KDA layers × 2 cells (one a sequence) × 4 B
    assert mem.r_bytes == 69 * 110592 * 4 * 2 == 61046784
    assert mem.s_bytes == 69 * 1572864 * 4 * 2 == 868220928
    assert mem.lines[0].startswith("llama_kv_cache: size = 3456.00 MiB ( 65536 cells,  24 layers,"
                                   "  2/2 seqs), K (f16): 3456.00 MiB, V (f16):    0.00 MiB")
    assert mem.lines[1] == ("llama_memory_recurrent: size =  886.22 MiB (     2 cells,  93 layers,"
                            "  2 seqs  0 rs_seq), R (f32):   58.22 MiB, S (f32):  828.00 MiB")
    report = engine_plan("llama.cpp", req("kimi-k3", ctx=131072, gpu="h200",
                                          parallel=Parallel(pp=8)))
    assert report.extra["k_bytes"] > 0 and report.extra["state_bytes"] > 0


def test_kimi_linear_is_not_refused_with_kimi_k3():
    for engine in ("sglang", "llama.cpp", "trtllm"):
        assert engine_plan(engine, req("kimi-linear-48b-a3b-instruct", gpu="h200")).kv_tokens


# --- Gemma-3n -------------------------------------------------------------------------------

def _gemma3n_req(engine_gpus=1, **over):
    spec = spec_from_config(_gemma3n(**over), name="gemma-3n-e4b", source="test")
    return EngineRequest(spec=spec, context=32768, cache=CacheOptions(kv_k="f16", kv_v="f16"),
                         gpus=(find_gpu("h200"),) * engine_gpus,
                         parallel=Parallel(tp=engine_gpus))


def test_vllm_gemma3n_pages_only_the_layers_that_own_a_cache():
    spec = _gemma3n_req().spec
    pool = vllm.pool(spec, GiB, F16, F16, 16)
    # layers 0..19 hold pages (20..34 name a kv_sharing_target_layer_name): 4 full and 16
    # sliding, 2 heads × (256 + 256) × 2 B = 2,048 B a token each, a 16-token page of 32 KiB;
    # groups of 4: one full, 16 / 4 = 4 sliding
    assert pool.page == 16 * 2 * 512 * 2 == 32768
    assert pool.group_size == 4 and len(pool.groups) == 5
    assert pool.num_blocks == GiB // 32768 // 4 == 8192
    # a 32,768-token request: 2,048 full blocks + 4 × (cdiv(511 + 8192, 16) + 1)
    assert pool.blocks_per_request(32768, 8192, 0) == 2048 + 4 * (544 + 1) == 4228


def test_vllm_gemma3n_keeps_the_per_layer_table_on_the_gpu():
    # bf16 weights, 7,850,135,376 × 2 B, the per-layer table among them (VocabParallelEmbedding
    # in gemma3n.py): whole at tp 1; at tp 2 every rank holds half of all but the replicated
    # part (37,509,360 parameters: norms, AltUp, per-layer gate and projection) and that whole
    r1 = engine_plan("vllm", _gemma3n_req())
    assert r1.weights_bytes == 7850135376 * 2
    r2 = engine_plan("vllm", _gemma3n_req(2))
    whole = 37509360 * 2
    assert r2.weights_bytes == (7850135376 * 2 - whole) // 2 + whole == 7887644736


def test_llamacpp_gemma3n_caches_20_layers_and_keeps_the_tables_on_the_host():
    r = engine_plan("llama.cpp", _gemma3n_req())
    # n_layer_kv_from_start = 20 (gemma3n.cpp): the non-SWA cache holds the 4 full layers over
    # 32,768 cells, 4 × 2 × 256 × 2 B × 32,768 × 2 (K, V) = 256 MiB; the SWA cache 16 layers
    # over pad256(512 + 512) = 1,024 cells, 32 MiB
    assert r.log_lines[:4] == (
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 32768 cells",
        "llama_kv_cache: size =  256.00 MiB ( 32768 cells,   4 layers,  1/1 seqs), "
        "K (f16):  128.00 MiB, V (f16):  128.00 MiB",
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells",
        "llama_kv_cache: size =   32.00 MiB (  1024 cells,  16 layers,  1/1 seqs), "
        "K (f16):   16.00 MiB, V (f16):   16.00 MiB")
    # token_embd and per_layer_token_embd are input layers (llama-arch.cpp), left in host
    # memory; the tied output is a copy of token_embd on the device: all but the per-layer
    # table, (7,850,135,376 − 262,144 × 35 × 256) × 2 B
    assert r.weights_bytes == (7850135376 - 262144 * 35 * 256) * 2 == 11002650272


def test_llamacpp_refuses_gemma3n_sharing_from_another_layer():
    # llama.cpp fixes the first 20 layers as the cache owners: a config keeping 25 would run
    # with the wrong layers reading a cache
    with pytest.raises(InputError, match="first 20 layers .* this config 25") as err:
        engine_plan("llama.cpp", _gemma3n_req(shared=10))
    assert err.value.field == "engine"


@pytest.mark.parametrize(("engine", "what"), [("trtllm", "Gemma-3n")])
def test_engines_refuse_gemma3n_where_its_layout_was_not_read(engine, what):
    with pytest.raises(InputError, match=f"could not establish .*{what}") as err:
        engine_plan(engine, _gemma3n_req())
    assert err.value.field == "engine"


def test_gemma4_e2b_per_layer_table_leaves_the_embedding_tied():
    w = weights_for(spec_from_config(_gemma4_e2b(), name="e2b", source="t"))
    # the lm_head is the 262,144 × 1536 token table (tied), read every token; the per-layer
    # table 262,144 × 35 × 256 is apart (before, it made the embedding look untied and the
    # head half of both tables)
    assert not w.lm_head_separate
    assert w.head_bytes == w.embedding_bytes == 262144 * 1536 * 2
    assert w.per_layer_embedding_bytes == 262144 * 35 * 256 * 2


# --- Laguna: full + sliding (window 512) layers of 8 KV heads × 128 -------------------------

def test_laguna_under_each_engine():
    per_layer = 8 * 256 * 2  # 8 KV heads × (128 + 128) × 2 B = 4,096 B a token
    # SGLang lists LagunaForCausalLM in is_hybrid_swa_model: a full pool (10 layers) and a
    # window pool (30 layers) holding 0.8 as many tokens
    r = engine_plan("sglang", req("laguna-xs.2", gpu=None, kv_budget_bytes=4 * GiB))
    full = int(4 * GiB / (10 * per_layer + 0.8 * 30 * per_layer))
    assert (r.kv_tokens, r.extra["swa_tokens"]) == (full, int(full * 0.8)) == (30840, 24672)
    assert r.log_lines[0].startswith("Use sliding window memory pool.")
    # vLLM: one page size (16 × 4,096 B), groups of 10 layers (1 full, 3 sliding); a request of
    # 131,072 tokens holds 8,192 full pages and 3 × (ceil((511 + 8,192) / 16) + 1) window pages
    pool = vllm.pool(load_model("laguna-xs.2"), 4 * GiB, F16, F16, 16)
    assert (pool.group_size, len(pool.groups)) == (10, 4)
    assert pool.num_blocks == 4 * GiB // (16 * per_layer) // 10
    assert pool.blocks_per_request(131072, 8192, 0) == 8192 + 3 * (544 + 1)
    # llama.cpp (iSWA): 10 layers × 32,768 cells + 30 layers × pad256(512 + 512) = 1,024 cells
    mem = llamacpp.kv_bytes(load_model("laguna-xs.2"), 32768, 1, "f16", "f16")
    assert mem.kv_bytes == (10 * 32768 + 30 * 1024) * per_layer
    # TensorRT-LLM: no window pools by default, every layer at full length; whole 32-token blocks
    r = engine_plan("trtllm", req("laguna-xs.2", gpu=None, kv_budget_bytes=4 * GiB))
    assert r.extra["bytes_per_token"] == 40 * per_layer
    assert r.kv_tokens == -(-(4 * GiB // (40 * per_layer)) // 32) * 32 == 26240


@pytest.mark.parametrize(("config", "arch"), [
    (_ernie45_21b(), "Ernie4_5_MoeForCausalLM"),
    (_lfm2_8b(), "Lfm2MoeForCausalLM"),
])
def test_trtllm_refuses_ernie45_and_lfm2_moe(config, arch):
    # neither architecture is in TensorRT-LLM's _arch_index.py MODEL_ARCH_TO_MODULE
    spec = spec_from_config(config, name="t", source="test")
    with pytest.raises(InputError, match=f"has no {arch} model"):
        engine_plan("trtllm", EngineRequest(spec=spec, context=4096, sequences=1,
                                            cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                            kv_budget_bytes=4 * GiB))


def test_trtllm_refuses_voxtral_apertus_and_an_unregistered_ministral3():
    # Voxtral's text_config is a llama, but VoxtralForConditionalGeneration is not registered
    with pytest.raises(InputError, match="has no VoxtralForConditionalGeneration model"):
        engine_plan("trtllm", req("voxtral-mini-3b-2507", gpu="h200"))
    with pytest.raises(InputError, match="builds Ministral3ForCausalLM"):
        engine_plan("trtllm", req("devstral-2-123b-instruct-2512", gpu="h200"))
    apertus = spec_from_config({"model_type": "apertus", "hidden_size": 512,
                                "intermediate_size": 2048, "num_hidden_layers": 2,
                                "num_attention_heads": 4, "vocab_size": 1000},
                               name="t", source="test")
    with pytest.raises(InputError, match="has no ApertusForCausalLM model"):
        engine_plan("trtllm", EngineRequest(spec=apertus, context=4096, sequences=1,
                                            cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                            kv_budget_bytes=4 * GiB))


@pytest.mark.parametrize(("model", "arch", "model_type"), [
    # no MiMo class of any kind is registered in models/_arch_index.py
    ("mimo-v2-flash", "MiMoV2FlashForCausalLM", "mimo_v2_flash"),
    # modeling_step3p7.py registers Step3p5ForCausalLM (and the VLM Step3p7ForConditional-
    # Generation); the bundled config names Step3p7FlashForCausalLM, which nothing maps
    ("step-3.7-flash", "Step3p7FlashForCausalLM", "step3p7"),
])
def test_trtllm_refuses_unregistered_mimo_v2_and_step37_flash(model, arch, model_type):
    with pytest.raises(InputError, match=f"has no {arch} model \\({model_type}\\)") as err:
        engine_plan("trtllm", req(model, gpu="h200"))
    assert err.value.field == "engine"
    # the class is missing before any cache exists: no layout sentence
    assert "could not establish" not in str(err.value)


def test_trtllm_still_refuses_a_registered_step37_layout():
    # a Step3p7ForConditionalGeneration config is registered, but its per-kind KV heads and
    # windows in the cache manager were not traced: still the layout refusal
    import json
    from pathlib import Path
    path = Path(__file__).parents[1] / "kvcore" / "data" / "models" / "step-3.7-flash.json"
    config = json.loads(path.read_text())
    config["architectures"] = ["Step3p7ForConditionalGeneration"]
    spec = spec_from_config(config, name="t", source="test")
    with pytest.raises(InputError, match="could not establish Step-3.7's sliding-window cache"):
        engine_plan("trtllm", EngineRequest(spec=spec, context=4096, sequences=1,
                                            cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                            kv_budget_bytes=4 * GiB))


def test_trtllm_refuses_muse_glimmer():
    import json
    from pathlib import Path
    path = Path(__file__).parent / "data" / "configs" / "muse-glimmer-30b.json"
    spec = spec_from_config(json.loads(path.read_text()), name="t", source="test")
    with pytest.raises(InputError, match="has no MuseGlimmerForConditionalGeneration model"):
        engine_plan("trtllm", EngineRequest(spec=spec, context=4096, sequences=1,
                                            cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                            kv_budget_bytes=4 * GiB))


def test_hunyuan_a13b_under_each_engine():
    # 32 full layers × 8 KV heads × (128 + 128) × 2 B = 131,072 B a token
    per_token = 32 * 8 * 256 * 2
    # vLLM: one group of the 32 layers, pages of 16 tokens
    pool = vllm.pool(load_model("hunyuan-a13b-instruct"), 4 * GiB, F16, F16, 16)
    assert (pool.group_size, len(pool.groups)) == (32, 1)
    assert pool.num_blocks == 4 * GiB // (16 * per_token) == 2048
    # SGLang: 4 GiB / 131,072 B = 32,768 tokens, K and V 2 GiB each
    r = engine_plan("sglang", req("hunyuan-a13b-instruct", gpu=None, kv_budget_bytes=4 * GiB))
    assert r.kv_tokens == 4 * GiB // per_token == 32768
    # llama.cpp: 32,768 cells in every layer
    mem = llamacpp.kv_bytes(load_model("hunyuan-a13b-instruct"), 32768, 1, "f16", "f16")
    assert mem.kv_bytes == 32768 * per_token
    # TensorRT-LLM (HunYuanMoEV1ForCausalLM is in _arch_index.py): whole 32-token blocks
    r = engine_plan("trtllm", req("hunyuan-a13b-instruct", gpu=None, kv_budget_bytes=4 * GiB))
    assert r.extra["bytes_per_token"] == per_token
    assert r.kv_tokens == 32768


@pytest.mark.parametrize(("engine", "name"), [
    ("vllm", "vLLM"), ("sglang", "SGLang"), ("llama.cpp", "llama.cpp"),
    ("trtllm", "TensorRT-LLM"),
])
def test_hunyuan_cross_layer_attention_is_refused_by_engines(engine, name):
    spec = spec_from_config(_hunyuan_large(), name="t", source="test")
    r = EngineRequest(spec=spec, context=8192, sequences=1,
                      cache=CacheOptions(kv_k="f16", kv_v="f16"), kv_budget_bytes=4 * GiB)
    with pytest.raises(InputError, match=f"^{name}: kvplan could not establish the cache of "
                                         r"cross-layer attention \(use_cla, cla_share_factor "
                                         r"2\)"):
        engine_plan(engine, r)
    # without use_cla every engine sizes it
    plain = spec_from_config(_hunyuan_large(use_cla=False), name="t", source="test")
    r = EngineRequest(spec=plain, context=8192, sequences=1,
                      cache=CacheOptions(kv_k="f16", kv_v="f16"), kv_budget_bytes=4 * GiB)
    assert engine_plan(engine, r).kv_tokens > 0


# --- vLLM 0.33.0 and 0.34.0 ----------------------------------------------------------------------
# Figures worked from the v0.33.0 release package: v1/kv_cache_interface.py
# (SlidingWindowSpec.max_admission_blocks_per_request, MambaSpec.max_memory_usage_bytes),
# config/vllm.py (max_in_flight_tokens), platforms/interface.py (_align_hybrid_block_size),
# model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py (_resolve_gdn_prefill_backend),
# v1/core/kv_cache_planning.py (get_kv_cache_configs, _check_enough_kv_cache_memory),
# v1/engine/core.py (the capacity line only after the check), utils/mem_utils.py (format_gib).

def test_vllm_sliding_window_keeps_two_batches_in_flight():
    # gpt-oss-20b on an H200 at 128K: max_num_batched_tokens 8,192, async scheduling on the
    # V2 model runner keeps pp + 1 = 2 batches in flight, so a 128-token window holds
    # cdiv(min(127 + 16,384, 131,072), 64) + 1 = 259 blocks beside 2,048 full ones (0.33.0's
    # 16-token blocks: 1,033 and 8,192)
    r = engine_plan("vllm", req("gpt-oss-20b", ctx=131072, gpu="h200"))
    assert r.extra["in_flight_tokens"] == 16384
    per_request = 131072 // 64 + (-(-(127 + 16384) // 64) + 1)
    assert per_request == 2307
    assert r.blocks == committed(r, 64 * 8 * 128 * 2, 12)
    assert r.max_concurrency == r.blocks / per_request
    # two pipeline stages: three batches in flight
    r2 = engine_plan("vllm", req("gpt-oss-20b", ctx=131072, gpu="h200",
                                 parallel=Parallel(pp=2)))
    assert r2.extra["in_flight_tokens"] == 3 * 8192


def test_vllm_batch_tier_of_160_gib_cards_widens_the_window_reserve():
    # a B200 (over 160 GiB) defaults to 16,384 batched tokens, so 32,768 in flight
    r = engine_plan("vllm", req("gpt-oss-20b", ctx=131072, gpu="b200"))
    assert r.extra["in_flight_tokens"] == 32768
    per_request = 131072 // 64 + (-(-(127 + 32768) // 64) + 1)
    assert per_request == 2048 + 515 and r.max_concurrency == r.blocks / per_request


@pytest.mark.parametrize("gpu,block,pages", [
    ("h200", 576, 3),   # sm90: FlashInfer GDN prefill, 64-token checkpoints, 3 state pages
    ("b200", 576, 3),   # sm100, linear_key_head_dim 128, CUDA 13 wheels
    ("a100", 576, 2),   # sm80: Triton/FLA prefill, 2 state pages
])
def test_vllm_gdn_prefill_checkpoint(gpu, block, pages):
    # Qwen3-Next at tp 1: 2,048 B of attention a token, a 1,097,728 B GDN state. The
    # align-mode block is a multiple of the default 64 (lcm(64, 64) with FlashInfer's GDN
    # checkpoints): 64 × cdiv(1,097,728, 64 × 2,048) = 576 (0.33.0's 16 gave 544 on an A100)
    r = engine_plan("vllm", req("qwen3-next-80b-a3b-instruct", ctx=32768, gpu=gpu,
                                weights="int4", kv_budget_bytes=20 * GiB))
    assert r.blocks == 20 * GiB // (block * 2048) // 12 > 0
    assert r.block_tokens == block and r.extra["page_bytes"] == block * 2048
    # 12 full : 36 GDN layers: one attention group and three state groups of 12
    assert r.extra["group_size"] == 12 and len(r.extra["groups"]) == 4
    per_request = -(-32768 // block) + 3 * pages
    assert r.max_concurrency == r.blocks / per_request
    assert any("third state page" in n for n in r.notes) == (pages == 3)


def test_vllm_startup_check_keeps_the_null_block_back():
    # Llama-3.1-8B, 32K: a request needs 512 blocks of 8 MiB (64 tokens) = 4 GiB. With exactly
    # 4 GiB the pool has 512 blocks (concurrency 1.00x), but the check plans against 4 GiB less
    # one block: it fails, and the estimate is cdiv(n, 64) ≤ 511, n = 32,704
    r = engine_plan("vllm", req("llama-3.1-8b", ctx=32768, gpu=None, kv_budget_bytes=4 * GiB))
    assert r.blocks == 512 and r.max_concurrency == 1.0 and not r.fits
    assert r.log_lines == (
        "Available KV cache memory: 4.0 GiB",
        "ValueError: To serve at least one request with the model's max seq len (32768), "
        "(4.0 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(3.99 GiB). Based on the available memory, the estimated maximum model length is "
        "32704.")
    assert r.max_context == 32704
    # one block more and it starts, printing the one capacity line
    ok = engine_plan("vllm", req("llama-3.1-8b", ctx=32768, gpu=None,
                                 kv_budget_bytes=4 * GiB + 8 * MiB))
    assert ok.fits and ok.log_lines == (
        "Available KV cache memory: 4.01 GiB",
        "GPU KV cache size: 32,832 tokens, Maximum concurrency for 32,768 tokens per "
        "request: 1.00x")


def test_vllm_startup_check_after_warmup():
    # with the extensible cache the second check runs against the blocks committed after
    # warmup: a pool whose reservation holds a 32K request but whose measured bytes do not
    lines = vllm.startup_lines(4 * GiB + 16 * MiB, 8 * MiB, lambda n: -(-n // 64) * 8 * MiB,
                               32768, 0, 0.0, final_blocks=500)
    assert lines[0] == "Available KV cache memory: 4.02 GiB"
    assert lines[1].startswith("ValueError: To serve at least one request with the model's "
                               "max seq len (32768), (4.0 GiB KV cache is needed, which is "
                               "larger than the available KV cache memory (3.9 GiB).")
    assert len(lines) == 2


def test_vllm_estimate_left_out_when_no_token_fits():
    # 1.5 blocks: 0.5 of a block left after the null block, less than one request's block
    r = engine_plan("vllm", req("llama-3.1-8b", ctx=4096, gpu=None, kv_budget_bytes=12 * MiB))
    assert r.log_lines[-1] == (
        "ValueError: To serve at least one request with the model's max seq len (4096), "
        "(0.5 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(0.0 GiB).")
    # exactly one block: nothing left once the null block is held back
    r = engine_plan("vllm", req("llama-3.1-8b", ctx=4096, gpu=None, kv_budget_bytes=8 * MiB))
    assert r.log_lines[-1].startswith("ValueError: No available memory for the cache blocks.")
    assert len(r.log_lines) == 2


def test_vllm_033_mla_hybrid_aligns_to_128_tokens():
    # Kimi-Linear with a 64-token --block-size: the MLA rule raises the alignment to
    # max(16, 64, 128) = 128, so the block stays 128 × cdiv(2,170,880, 128 × 1,152) = 1,920
    spec = load_model("kimi-linear-48b-a3b-instruct")
    assert vllm.pool(spec, 10 * GiB, F16, F16, 64).min_block == 1920
    # a 256-token block is the alignment itself: 256 × cdiv(2,170,880, 256 × 1,152) = 2,048
    assert vllm.pool(spec, 10 * GiB, F16, F16, 256).min_block == 2048


def test_llamacpp_recurrent_line_matches_a_real_mtp_log():
    # the recurrent size line of a current build (b9191 on: "… 3 seqs  0 rs_seq)"), with the
    # GGUF's next-n block in hparams.n_layer (65 = 64 blocks + 1), as a real Qwen3.5-27B run
    # with -np 3 printed it (PR #23792's thread)
    import tomllib
    from pathlib import Path

    log = tomllib.loads((Path(__file__).parent / "data" / "engine_logs" /
                         "llamacpp-qwen35-27b-mtp-recurrent-tp-3seq.toml").read_text())
    real = next(line.split(" I ", 1)[1] for line in log["excerpt"].splitlines()
                if "llama_memory_recurrent: size" in line)
    r = engine_plan("llama.cpp", EngineRequest(
        spec=load_model("qwen3.5-27b"), context=4096, sequences=3,
        cache=CacheOptions(kv_k="f16", kv_v="f16", mtp=True), gpus=(find_gpu("h200"),)))
    assert real in r.log_lines
    plain = engine_plan("llama.cpp", req("qwen3.5-27b", ctx=4096, seqs=3, gpu="h200"))
    line = next(x for x in plain.log_lines if x.startswith("llama_memory_recurrent: size"))
    assert "  64 layers,  3 seqs  0 rs_seq)" in line


@pytest.mark.parametrize(("engine", "gpu", "runs"), [
    ("vllm", "m2 ultra", "NVIDIA, AMD and Intel"), ("sglang", "m4 max", "NVIDIA, AMD and Intel"),
    ("trtllm", "mi300x", "NVIDIA"), ("trtllm", "7900 xtx", "NVIDIA"),
    ("trtllm", "arc a770", "NVIDIA"),
])
def test_an_engine_is_not_planned_on_a_card_it_does_not_run_on(engine, gpu, runs):
    # vLLM builds for the CPU on macOS, TensorRT-LLM for CUDA only: their rules would size a
    # pool the card never gets
    with pytest.raises(InputError, match=f"does not run on .*: its GPU build runs on {runs} "
                                         r"cards( \(.*\))?; plan it with --engine llama.cpp "
                                         "or raw") as info:
        _answer("llama-3.1-8b", engine, gpu=gpu)
    assert info.value.field == "engine"


@pytest.mark.parametrize(("engine", "gpu", "why"), [
    # vLLM's CUDA wheels (CUDA 12.8 on) start at 7.5; sgl-kernel and TensorRT-LLM at 8.0
    ("vllm", "v100", r"\(compute capability 7\.0\): its CUDA wheels have kernels for compute "
                     r"capability 7\.5 and up"),
    ("sglang", "t4", r"\(compute capability 7\.5\): its kernels \(sgl-kernel\) are built for "
                     r"compute capability 8\.0 and up"),
    ("sglang", "2080 ti", "compute capability 8.0 and up"),
    ("trtllm", "t4", r"\(compute capability 7\.5\): it builds for compute capability 8\.0 and up"),
    ("trtllm", "v100-32gb", "compute capability 8.0 and up"),
    # SGLang's ROCm kernels build for MI300 and MI350 chips only
    ("sglang", "7900 xtx", r"\(gfx1100\): its ROCm build runs on gfx942 and gfx950 only"),
    ("sglang", "mi250x", r"\(gfx90a\): its ROCm build runs on gfx942 and gfx950 only"),
    # Pascal and the ROCm chips vLLM's images leave out (Vega 20, RDNA 2)
    ("vllm", "p40", r"\(compute capability 6\.1\): .* 7\.5 and up"),
    ("vllm", "p100", r"\(compute capability 6\.0\): .* 7\.5 and up"),
    ("trtllm", "p40", "compute capability 8.0 and up"),
    ("vllm", "mi50", r"\(gfx906\): its ROCm build runs on gfx90a, .*gfx1201 only"),
    ("vllm", "6800 xt", r"\(gfx1030\): its ROCm build runs on .* only"),
    ("vllm", "6700 xt", r"\(gfx1031\): its ROCm build runs on .* only"),
    ("sglang", "6900 xt", r"\(gfx1030\): its ROCm build runs on gfx942 and gfx950 only"),
])
def test_an_engine_is_not_planned_on_a_chip_its_build_has_no_kernels_for(engine, gpu, why):
    settings = EngineSettings(mem_fraction_static=0.85 if engine == "sglang" else None)
    with pytest.raises(InputError, match=f"does not run on .* {why}; plan it with --engine "
                                         "llama.cpp or raw") as info:
        _answer("llama-3.1-8b", engine, gpu=gpu, settings=settings)
    assert info.value.field == "engine"


@pytest.mark.parametrize(("engine", "gpu"), [
    ("vllm", "mi300x"), ("vllm", "arc a770"), ("sglang", "mi300x"), ("trtllm", "24GiB"),
    ("llama.cpp", "m2 ultra"), ("raw", "m2 ultra"),
    # at each build's floor, and the chips vLLM's ROCm images and SGLang's kernels list
    ("vllm", "t4"), ("vllm", "2080 ti"), ("sglang", "a100"), ("trtllm", "a10"),
    ("vllm", "7900 xtx"), ("vllm", "9060 xt"), ("vllm", "mi250x"), ("sglang", "mi355x"),
    ("llama.cpp", "v100"), ("ollama", "v100"), ("raw", "t4"),
    # llama.cpp's CUDA 12 builds reach Pascal, its HIP and Vulkan builds Vega 20 and RDNA 2
    ("llama.cpp", "p40"), ("ollama", "p40"), ("llama.cpp", "p100"), ("llama.cpp", "mi50"),
    ("llama.cpp", "6700 xt"), ("raw", "p40"),
])
def test_an_engine_is_planned_on_the_cards_it_runs_on(engine, gpu):
    # SGLang's own fraction is sized for CUDA cards only: given here
    settings = EngineSettings(mem_fraction_static=0.85 if engine == "sglang" else None)
    assert _answer("llama-3.1-8b", engine, gpu=gpu, settings=settings)["engine"] == engine


@pytest.mark.parametrize(("engine", "why"), [
    # Gaudi is an HPU: vLLM runs there through its plugin only, llama.cpp not at all
    ("vllm", "itself: Gaudi runs it through the vllm-gaudi plugin"),
    ("llama.cpp", r"\(ggml has no Gaudi backend"), ("ollama", r"\(ggml has no Gaudi backend"),
    ("trtllm", ": its GPU build runs on NVIDIA cards"),
])
def test_gaudi_is_planned_under_raw_only_of_the_engines_that_do_not_run_on_it(engine, why):
    with pytest.raises(InputError, match=f"does not run on Intel Gaudi 3 ?{why}.*; plan it with "
                                         "--engine raw$") as info:
        _answer("llama-3.1-8b", engine, gpu="gaudi 3")
    assert info.value.field == "engine"
    assert _answer("llama-3.1-8b", "raw", gpu="gaudi 3")["fits"]
    # the Intel cards vLLM's XPU platform runs on stay planned
    assert _answer("llama-3.1-8b", "vllm", gpu="arc pro b60", context="4k")["engine"] == "vllm"
    from app.common import make_query

    gguf = find_gpu_for(make_query(load_model("llama-3.1-8b"), engine="llama.cpp",
                                   context="4k"), limit=200)
    assert "gaudi-3" not in {r["gpu"] for r in gguf}


def test_find_gpu_says_none_fits_where_no_card_the_engine_runs_on_does():
    # the cards vLLM does not run on are left out, not given as the reason nothing fits
    from app.common import make_query

    q = make_query(load_model("llama-3.1-405b"), engine="vllm", context="1m", sequences=64)
    assert find_gpu_for(q) == []
    small = find_gpu_for(make_query(load_model("qwen3-0.6b"), engine="vllm", context="4k"),
                         limit=200)
    ids = {r["gpu"] for r in small}
    assert "t4" in ids and "rx-7900-xtx" in ids
    assert not ids & {"v100-16gb", "v100-32gb", "p40", "p100-16gb", "mi50", "rx-6800-xt"}
    gguf = find_gpu_for(make_query(load_model("qwen3-0.6b"), engine="llama.cpp",
                                   context="4k"), limit=200)
    assert {"p40", "mi50", "rx-6700-xt", "v100-16gb"} <= {r["gpu"] for r in gguf}
    # a maker none of whose cards the engine runs on: that, not "none fits"
    for engine, vendor in (("trtllm", "amd"), ("vllm", "apple"), ("sglang", "apple")):
        q = make_query(load_model("qwen3-0.6b"), engine=engine, context="4k")
        with pytest.raises(InputError, match=f"^no {vendor} card in the catalog runs "
                                             f"{ENGINE_TITLES[engine]}: .* does not run on") as e:
            find_gpu_for(q, vendor=vendor.upper())
        assert e.value.field == "vendor"


def test_find_gpu_leaves_out_cards_the_engine_does_not_run_on():
    from app.common import make_query

    rows = find_gpu_for(make_query(load_model("llama-3.1-70b"), engine="vllm", context="32k",
                                   sequences=4), limit=100)
    vendors = {g.id: g.vendor for g in gpu_catalog()}
    vendors.update({v.id: v.vendor for g in gpu_catalog() for v in memory_variants(g)})
    assert rows and all(vendors[r["gpu"]] != "apple" for r in rows)
    raw = find_gpu_for(make_query(load_model("llama-3.1-70b"), context="32k", sequences=4),
                       limit=100)
    assert any(vendors[r["gpu"]] == "apple" for r in raw)


def test_find_gpu_settles_sglangs_dsa_dtype_card_by_card():
    # --kv f16 is SGLang's auto, which a DSA model resolves by the card (bfloat16 on Hopper,
    # fp8 from SM100, unsized): the search plans each card, where a plan without one asks for it
    from app.common import make_query

    q = make_query(load_model("deepseek-v3.2"), engine="sglang", context="128k")
    with pytest.raises(InputError) as e:
        check_engine(q)
    assert e.value.field == "gpu"
    rows = find_gpu_for(q, limit=100)
    families = {g.id: g.cuda_family for g in gpu_catalog()}
    assert rows and all(families[r["gpu"]] == 9 for r in rows)
    assert rows[0]["count"] == 8 and rows[0]["max_context"] >= 131072


def test_sglang_serves_exaone_45_as_multimodal():
    # EXAONE 4.5 (no SGLang model: its Transformers backend) nests its decoder in text_config,
    # so ModelConfig makes it multimodal: SGLang's own fraction drops the breakable prefill
    # graph (not on the allow-list) and takes the vision tower's factor (24 layers of 2,048:
    # 0.95 × 0.8), and the pools give up the 100 MiB multimodal reserve
    from app.common import make_query
    from kvcore.engines.sglang import auto_mem_fraction, vision_factor

    h100 = find_gpu("h100")
    r = engine_plan("sglang", req("exaone-4.5-33b", ctx=32768, gpu="h100"))
    frac = auto_mem_fraction(h100.total_bytes, 1, 1, running=1, prefill_graph=False)
    assert vision_factor(24, 2048) == 0.95 * 0.8
    assert r.extra["mem_fraction_static"] == pytest.approx(frac * 0.95 * 0.8)
    assert r.log_lines[0] == f"mem_fraction_static={frac * 0.95 * 0.8}"
    big = engine_plan("sglang", req("exaone-4.5-33b", ctx=32768, gpu="h200"))
    assert big.fits and big.log_lines[1].startswith("Reserving 0.10 GB of the KV budget")
    q = make_query(load_model("exaone-4.5-33b"), engine="sglang", context="32k")
    rows = find_gpu_for(q)
    assert rows and rows[0]["max_context"] >= 32768


def test_find_gpu_says_what_stops_the_engine_where_no_card_fits():
    from app.common import make_query

    # GLM-5 fits no Hopper host in bf16 and SGLang's auto is an unsized fp8 row on Blackwell:
    # the refusal names --kv bf16, with which Blackwell hosts are found
    glm = make_query(load_model("glm-5"), engine="sglang", context="32k")
    with pytest.raises(InputError, match="choose --kv bf16"):
        find_gpu_for(glm)
    assert find_gpu_for(make_query(load_model("glm-5"), engine="sglang", context="32k",
                                   kv="bf16"))


def test_find_gpu_tries_each_mac_in_the_memory_sizes_it_was_sold_with():
    from app.common import make_query

    q = make_query(load_model("qwen3-8b"), engine="llama.cpp", context="32k", weights="q4_k_m")
    rows = {r["gpu"]: r for r in find_gpu_for(q, limit=1000)}
    # the 24 GB M4 Pro fits (18 GiB Metal may wire) and is listed at its own size
    assert rows["m4-pro-24gb"]["total_memory_bytes"] == 24 << 30
    assert find_gpu("m4-pro-24gb").usable_bytes == 18 << 30
    assert {"m4-pro-48gb", "m4-pro"} <= set(rows)


@pytest.mark.parametrize(("gpu", "pages_on"), [("h200", 3), ("a100-80gb-sxm", 2)])
def test_prefix_caching_off_keeps_one_state_page_a_request(gpu, pages_on):
    # vLLM turns prefix caching on and with it mamba_cache_mode "align": two state pages a
    # request per recurrent group, three where FlashInfer's GDN prefill exports a checkpoint
    # (Hopper); --no-enable-prefix-caching runs "none": one
    from kvcore.engines import vllm

    spec, f16 = load_model("qwen3.5-27b"), get_format("f16")
    on = vllm.pool(spec, 40 << 30, f16, f16, 16, gpu=find_gpu(gpu))
    off = vllm.pool(spec, 40 << 30, f16, f16, 16, gpu=find_gpu(gpu), prefix_caching=False)
    states = [g for g in on.groups if g.state]
    assert states and all(g.pages_for(262144, 2048, 0) == pages_on for g in states)
    assert all(g.pages_for(262144, 2048, 0) == 1 for g in off.groups if g.state)
    for pl, pages in ((on, pages_on), (off, 1)):
        attention = sum(g.pages_for(262144, 2048, 0) for g in pl.groups if not g.state)
        assert pl.blocks_per_request(262144, 2048, 0) == attention + len(states) * pages
    # "align" mode also aligns the block to the GDN checkpoint's 64 tokens; "none" does not
    if pages_on == 3:
        assert on.min_block % 64 == 0 and off.min_block % 64 != 0
    else:
        assert on.min_block == off.min_block
    # the planned command says so, and a dense model's plan is the same either way
    q = dict(gpu="h200", context="256k")
    plain = _answer("qwen3.5-27b", "vllm", **q)["engine_report"]
    settings = EngineSettings(prefix_caching=False)
    off_plan = _answer("qwen3.5-27b", "vllm", **q, settings=settings)["engine_report"]
    assert off_plan["command"].endswith("--no-enable-prefix-caching")
    assert off_plan["max_concurrency"] > plain["max_concurrency"]
    dense = [_answer("llama-3.1-8b", "vllm", gpu="h200", settings=x)["engine_report"]
             for x in (EngineSettings(), settings)]
    assert dense[0]["max_concurrency"] == dense[1]["max_concurrency"]


def test_find_weights_orders_by_size_and_says_what_fit_keeps_in_host_memory():
    from kvcore.query import find_weights
    from kvcore.weights import weights_for

    spec = load_model("llama-3.1-70b-instruct")
    q = Query(spec=spec, context=16384, engine="llama.cpp", gpus=(find_gpu("4090"),),
              cache=CacheOptions(kv_k=get_format("q8_0"), kv_v=get_format("q8_0")))
    rows = find_weights(q)
    names = [r["weights"] for r in rows]
    # llama.cpp loads 16-bit GGUF and every llama-quantize mix, largest first
    assert names[0] == "bf16" and len(names) == 28 and "fp8" not in names and "f16" not in names
    sizes = [r["weights_bytes"] for r in rows]
    assert sizes == sorted(sizes, reverse=True)
    assert next(r for r in rows if r["weights"] == "q4_k_m")["weights_bytes"] == \
        weights_for(spec, "q4_k_m").bytes
    # less weight, more context: the largest that fits 16k on a 24 GB card is IQ2_XS
    contexts = [r["max_context"] for r in rows]
    assert contexts == sorted(contexts)
    assert next(r for r in rows if r["fits"])["weights"] == "iq2_xs"
    assert all(r["max_context"] >= 16384 for r in rows if r["fits"])
    # a type that does not fit runs under --fit with part of the model in host memory: the
    # smaller the weights, the less there and the faster its decode
    held = [r for r in rows if not r["fits"]]
    assert all("host_fit" in r for r in held)
    host = [r["host_fit"]["host_weights_bytes"] for r in held]
    rates = [r["host_fit"]["tokens_per_s_per_sequence"] for r in held]
    assert host == sorted(host, reverse=True) and rates == sorted(rates)
    assert all(h < r["weights_bytes"] for h, r in zip(host, held, strict=True))
    assert all("host_fit" not in r for r in rows if r["fits"])
    # llama-quantize's perplexity figures where its list gives one
    q4 = next(r for r in rows if r["weights"] == "q4_k_m")
    assert q4["perplexity_added"] == 0.1754 and "Llama-3-8B" in q4["quality"]
    assert next(r for r in rows if r["weights"] == "iq2_xs")["perplexity_added"] is None


def test_find_weights_under_a_serving_engine_tries_the_checkpoint_formats():
    from kvcore.query import find_weights

    q = Query(spec=load_model("qwen3-8b"), context=32768, engine="vllm",
              gpus=(find_gpu("4090"),))
    names = [r["weights"] for r in find_weights(q)]
    assert names[0] == "bf16" and {"fp8", "int8", "int4", "nvfp4"} <= set(names)
    assert not any(n.startswith(("q4_k", "iq")) for n in names)
    # gpt-oss ships its experts in MXFP4: that format is tried for it, not for others
    assert "mxfp4_moe" not in names
    oss = Query(spec=load_model("gpt-oss-20b"), context=32768, engine="vllm",
                gpus=(find_gpu("4090"),))
    assert "mxfp4_moe" in [r["weights"] for r in find_weights(oss)]
    with pytest.raises(InputError, match="needs a GPU to fit the weights on"):
        find_weights(Query(spec=q.spec, context=32768, engine="vllm"))


def test_vllm_cpu_offload_moves_whole_parameters_from_the_first_layer():
    from kvcore.engines.vllm_offload import _layer_params, offloaded

    spec = load_model("llama-3.1-8b")
    weights = weights_for(spec, "bf16")
    params = _layer_params(spec, weights, 1)
    # a Llama layer as vLLM holds it: qkv_proj, o_proj, gate_up_proj, down_proj, the norms
    assert [b for b, _ in params[0][:4]] == [(4096 + 2 * 1024) * 4096 * 2, 4096 * 4096 * 2,
                                            2 * 14336 * 4096 * 2, 14336 * 4096 * 2]
    budget = 6 * GiB
    m = offloaded(spec, weights, 1, range(32), budget)
    order = [b for layer in range(32) for b, _ in params[layer]]
    # the walk stops at the first parameter that takes it to the budget or past it
    k = next(i for i in range(len(order)) if sum(order[:i + 1]) >= budget)
    assert m.bytes == sum(order[:k + 1]) and m.bytes - order[k] < budget <= m.bytes
    assert (m.first_layer, m.last_layer, m.expert_bytes) == (0, 14, 0)
    # tensor parallelism: each rank walks its own shard, twice the layers for the budget
    half = offloaded(spec, weights, 2, range(32), budget)
    assert half.last_layer > 14 and budget <= half.bytes
    assert offloaded(spec, weights, 1, range(32), 0) is None


def test_vllm_cpu_offload_frees_the_card_and_reads_over_the_host_link():
    spec = load_model("llama-3.1-8b")
    ask = dict(spec=spec, context=12288, engine="vllm", gpus=(find_gpu("3060"),))
    plain = Query(**ask)
    off = Query(**ask, settings=EngineSettings(cpu_offload_bytes=7 * GiB))
    base, moved = engine_plan("vllm", plain), engine_plan("vllm", off)
    held = moved.extra["cpu_offload"]["bytes_per_rank"][0]
    # the KV pool gains exactly what the card no longer holds
    assert base.weights_bytes - moved.weights_bytes == held >= 7 * GiB
    assert moved.kv_pool_bytes - base.kv_pool_bytes == held
    assert not base.fits and moved.fits
    assert "--cpu-offload-gb 7" in moved.command
    from kvcore.query import answer
    plan_off, plan_base = answer(off), answer(plain)
    d = plan_off["decode"]
    # through a UVA view the card reads host memory at 80.6% of its link's rate (an H200's
    # PCIe 5.0 x16 measured: 50.8 of 63.0 GB/s)
    link = find_gpu("3060").host_link_bytes_per_s * 0.806
    # a dense model reads every moved byte over the link each step, the rest from the card
    assert d["offload_bytes_per_step"] == held
    assert d["offload_seconds_per_step"] == pytest.approx(held / link)
    card = d["seconds_per_step"] - d["offload_seconds_per_step"]
    assert card == pytest.approx(plan_base["decode"]["seconds_per_step"]
                                 - held / find_gpu("3060").bandwidth_bytes_per_s)
    # a prompt of 12,288 tokens in chunks of 2,048: six passes, each product reading them
    # once every 256 rows (8 times a chunk: 2,048 rows took 8.03 single reads measured)
    p = plan_off["prefill"]
    assert (p["offload_forwards"], p["offload_reads_per_forward"]) == (6, 8)
    assert p["seconds"] == pytest.approx(plan_base["prefill"]["seconds"]
                                         + 6 * 8 * held / link)
    # a given link replaces the card's
    slow = answer(Query(**ask, settings=EngineSettings(cpu_offload_bytes=7 * GiB,
                                                       host_link_bytes_per_s=8e9)))
    assert slow["decode"]["offload_seconds_per_step"] == pytest.approx(held / 8e9)


def test_vllm_cpu_offload_of_routed_experts_reads_the_routed_share():
    from kvcore.query import answer

    spec = load_model("qwen3-30b-a3b")
    q = Query(spec=spec, context=8192, engine="vllm", gpus=(find_gpu("4090"),),
              settings=EngineSettings(cpu_offload_bytes=40 * GiB))
    report = engine_plan("vllm", q)
    stage = report.extra["cpu_offload"]["stages"][0]
    assert stage["expert_bytes"] > 0.9 * stage["bytes"]
    d = answer(q)["decode"]
    share = d["expert_share"]
    assert d["offload_bytes_per_step"] == (stage["bytes"] - stage["expert_bytes"]
                                           + int(stage["expert_bytes"] * share))
    assert d["offload_bytes_per_step"] < stage["bytes"] * 0.2


def test_vllm_cpu_offload_over_pipeline_stages_starts_at_each_stage_s_first_layer():
    spec = load_model("llama-3.1-70b")
    q = Query(spec=spec, context=8192, engine="vllm", gpus=(find_gpu("4090"),) * 2,
              parallel=Parallel(pp=2), settings=EngineSettings(cpu_offload_bytes=30 * GiB))
    stages = engine_plan("vllm", q).extra["cpu_offload"]["stages"]
    assert [s["first_layer"] for s in stages] == [0, 40]
    assert all(s["bytes"] >= 30 * GiB for s in stages)
    # the setting is vLLM's
    with pytest.raises(InputError, match="cpu_offload_gb is a setting of vLLM"):
        Query(spec=spec, context=8192, engine="llama.cpp",
              settings=EngineSettings(cpu_offload_bytes=GiB))


def test_sglang_cpu_offload_copies_every_moved_byte_each_pass():
    from kvcore.query import answer

    spec = load_model("qwen3-30b-a3b")
    ask = dict(spec=spec, context=8192, engine="sglang", gpus=(find_gpu("4090"),))
    plain = engine_plan("sglang", Query(**ask))
    q = Query(**ask, settings=EngineSettings(cpu_offload_bytes=20 * GiB,
                                             mem_fraction_static=0.85))
    report = engine_plan("sglang", q)
    held = report.extra["cpu_offload"]["bytes_per_rank"][0]
    assert plain.weights_bytes - report.weights_bytes == held >= 20 * GiB
    assert "--cpu-offload-gb 20" in report.command
    # OffloaderV1 copies a layer's moved parameters whole, the experts no token routes to
    # as well, and the card then reads the copies from its own memory
    d = answer(q)["decode"]
    assert d["offload_bytes_per_step"] == held
    base = answer(replace(q, settings=EngineSettings(mem_fraction_static=0.85)))["decode"]
    assert d["bandwidth_seconds_per_step"] == pytest.approx(base["bandwidth_seconds_per_step"])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_cpu_offload_is_refused_where_not_planned(engine):
    # DeepSeek-V4's compressed caches take their own plan, which does not move weights: a
    # silent drop would give the plan without the offload
    q = Query(spec=load_model("deepseek-v4-flash"), context=8192, engine=engine,
              gpus=(find_gpu("h200"),) * 8, parallel=Parallel(tp=8),
              settings=EngineSettings(cpu_offload_bytes=4 * GiB))
    with pytest.raises(InputError, match="does not plan --cpu-offload-gb for DeepSeek-V4"):
        engine_plan(engine, q)


def test_vllm_language_model_only_leaves_the_towers_off_the_card():
    spec = load_model("qwen2.5-vl-7b-instruct")
    with_tower = weights_for(spec, None).bytes
    text_only = weights_for(spec, None, include_encoder=False).bytes
    tower = with_tower - text_only
    assert spec.params.encoder > 0 and tower > GiB  # Qwen2.5-VL's 32-block ViT in bf16
    base = engine_plan("vllm", req("qwen2.5-vl-7b-instruct", gpu="rtx-4090"))
    assert base.weights_bytes == with_tower
    assert any("profiles the vision/audio encoder at start-up" in n
               and f"{tower / GiB:.2f} GiB less weights" in n for n in base.notes)
    assert "--language-model-only" not in base.command
    lm = engine_plan("vllm", req("qwen2.5-vl-7b-instruct", gpu="rtx-4090",
                                 settings=EngineSettings(language_model_only=True)))
    # the tower's bytes move to the pool, nothing else changes (the activation is the
    # language model's)
    assert lm.weights_bytes == text_only
    assert lm.kv_pool_bytes - base.kv_pool_bytes == tower
    assert lm.command.endswith("--language-model-only")
    assert not any("profiles the vision/audio encoder" in n for n in lm.notes)
    assert any(n.startswith("--language-model-only: the towers") for n in lm.notes)
    # a text model: nothing to leave out, and the plan says so
    text = engine_plan("vllm", req("qwen3-8b", settings=EngineSettings(language_model_only=True)))
    assert engine_plan("vllm", req("qwen3-8b")).kv_pool_bytes == text.kv_pool_bytes
    assert any("no vision or audio tower" in n for n in text.notes)
    assert not any("vision/audio encoder" in n for n in engine_plan("vllm", req("qwen3-8b")).notes)
    with pytest.raises(InputError, match="language_model_only is a setting of vLLM"):
        check_settings("llama.cpp", EngineSettings(language_model_only=True))


@pytest.mark.parametrize(("model", "flags", "text_only"), [
    ("Qwen/Qwen2.5-VL-7B-Instruct", "--language-model-only", True),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "--limit-mm-per-prompt '{\"image\": 0, \"video\": 0}'", True),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "--limit-mm-per-prompt image=0,video=0", True),
    ("Qwen/Qwen2.5-VL-7B-Instruct",
     "--limit-mm-per-prompt.image 0 --limit-mm-per-prompt.video=0", True),
    ("Qwen/Qwen2.5-VL-7B-Instruct",
     "--limit-mm-per-prompt '{\"image\": {\"count\": 0, \"width\": 512}, \"video\": 0}'", True),
    # video still allowed: Qwen2.5-VL's vision tower serves both, so it is built
    ("Qwen/Qwen2.5-VL-7B-Instruct", "--limit-mm-per-prompt.image 0", False),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "--limit-mm-per-prompt '{\"image\": 2, \"video\": 0}'",
     False),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "--language-model-only --limit-mm-per-prompt image=2", True),
    # Gemma 3's and Llama 4's towers serve images alone (their configs name no video token)
    ("google/gemma-3-27b-it", "--limit-mm-per-prompt '{\"image\": 0}'", True),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "--limit-mm-per-prompt.image 0", True),
    ("google/gemma-3-27b-it", "--limit-mm-per-prompt '{\"video\": 0}'", False),
    # an audio model's tower serves audio
    ("mistralai/Voxtral-Mini-3B-2507", "--limit-mm-per-prompt '{\"image\": 0}'", False),
    ("mistralai/Voxtral-Mini-3B-2507", "--limit-mm-per-prompt audio=0", True),
])
def test_vllm_command_reads_which_towers_are_built(model, flags, text_only):
    launch = read_command(f"vllm serve {model} {flags}")
    assert not launch.unread
    _, fields = resolve(launch)
    assert bool(fields.get("language_model_only")) is text_only
    if "--limit-mm-per-prompt" in flags and "--language-model-only" not in flags:
        said = [n for n in launch.notes if n.startswith("--limit-mm-per-prompt")]
        assert len(said) == 1 and ("builds no tower" in said[0]) is text_only


@pytest.mark.parametrize("flags", [
    "--limit-mm-per-prompt '[0, 0]'",
    "--limit-mm-per-prompt image",
    "--limit-mm-per-prompt image=none",
    "--limit-mm-per-prompt.image",
])
def test_vllm_command_refuses_a_malformed_modality_limit(flags):
    with pytest.raises(InputError, match="--limit-mm-per-prompt"):
        read_command(f"vllm serve Qwen/Qwen2.5-VL-7B-Instruct {flags}")


def test_vllm_command_reads_dotted_speculative_config():
    launch = read_command("vllm serve Qwen/Qwen3.5-27B --speculative-config.method mtp "
                          "--speculative_config.num_speculative_tokens 3")
    assert launch.settings["mtp"] is True and launch.settings["speculative_tokens"] == 3


def test_llamacpp_says_the_projector_s_compute_buffer_is_not_counted():
    said = "the projector (--mmproj) also reserves a compute buffer"
    r = engine_plan("llama.cpp", req("gemma-3-27b-it", gpu="rtx-4090", weights="q4_k_m"))
    assert "--mmproj" in r.command and any(said in n for n in r.notes)
    # no tower loaded, or none to load: nothing to say
    text = req("gemma-3-27b-it", gpu="rtx-4090", weights="q4_k_m")
    text = replace(text, cache=replace(text.cache, encoder=False))
    assert not any(said in n for n in engine_plan("llama.cpp", text).notes)
    assert not any(said in n for n in engine_plan("llama.cpp", req("qwen3-8b")).notes)


def test_vllm_builds_the_towers_on_the_first_pipeline_stage_only():
    # interfaces.py _mark_tower_model skips a tower on the pipeline stages after the first:
    # Qwen3.5-27B's vision tower (0.86 GiB in bf16) sits whole on stage 0, not split with the
    # decoder's layers; with no tower, both stages are as before
    from kvcore.engines.base import rank_weights

    r = req("qwen3.5-27b", gpu="a100-80gb", parallel=Parallel(tp=1, pp=2))
    text = replace(r, cache=replace(r.cache, encoder=False))
    tower = (vllm.loaded_weights(r, "bf16", encoder=True).bytes
             - vllm.loaded_weights(r, "bf16", encoder=False).bytes)
    assert 0.8 * GiB < tower < 0.9 * GiB
    spread = rank_weights(r, f32_as="bf16")[1]
    placed = vllm.towers_on_first_stage(r, spread)
    alone = rank_weights(text, f32_as="bf16")[1]
    assert abs(placed[0].weights_bytes - alone[0].weights_bytes - tower) <= 2
    assert abs(placed[1].weights_bytes - alone[1].weights_bytes) <= 2
    # the spread shares had put about half of it on each stage
    assert abs(spread[1].weights_bytes - alone[1].weights_bytes - tower // 2) < 0.01 * tower
    assert vllm.towers_on_first_stage(text, alone) == alone
    # and the plan's tightest stage is the first, its weights carrying the whole tower
    report = engine_plan("vllm", r)
    assert report.binding_stage == 0


@pytest.mark.parametrize(("gpu", "pages"), [("h200", 3), ("b200", 3), ("rtx-5090", 3),
                                             ("a100-80gb-sxm", 2)])
def test_vllm_kimi_k3_flashkda_checkpoint_page(gpu, pages):
    # Kimi-K3's KDA prefills on FlashKDA on CUDA majors 9, 10 and 12 (its 128-wide heads,
    # bf16, bounded gate), which exports a prefill checkpoint: a third state page a request;
    # A100 takes the Triton prefill (none). Kimi-Linear's KDA exports none on any card.
    k3 = vllm.pool(load_model("kimi-k3"), 40 * GiB, F16, F16, 64, gpu=find_gpu(gpu))
    assert {g.pages_for(8192, 8192, 0) for g in k3.groups if g.state} == {pages}
    linear = vllm.pool(load_model("kimi-linear-48b-a3b-instruct"), 40 * GiB, F16, F16, 64,
                       gpu=find_gpu(gpu))
    assert {g.pages_for(8192, 8192, 0) for g in linear.groups if g.state} == {2}
    off = vllm.pool(load_model("kimi-k3"), 40 * GiB, F16, F16, 64, gpu=find_gpu(gpu),
                    prefix_caching=False)
    assert {g.pages_for(8192, 8192, 0) for g in off.groups if g.state} == {1}


def test_vllm_names_the_release_that_removed_an_architecture():
    # registry.py _PREVIOUSLY_SUPPORTED_MODELS: Keye's own model went after 0.33.0; the
    # Transformers backend is then the only way it starts, which the plan says
    keye = replace(load_model("llama-3.1-8b"), architecture="KeyeForConditionalGeneration")
    r = engine_plan("vllm", EngineRequest(spec=keye, context=8192, sequences=1,
                                          cache=CacheOptions(kv_k=F16, kv_v=F16),
                                          gpus=(find_gpu("h100"),)))
    assert any("vLLM removed its own KeyeForConditionalGeneration after 0.33.0" in n
               and "pin vllm==0.33.0" in n for n in r.notes)
    assert not any("vLLM removed" in n for n in engine_plan(
        "vllm", req("llama-3.1-8b")).notes)


def test_vllm_mtp_tokens_reuse_the_draft_modules_whole():
    # Step-3.7-Flash's three MTP modules (n_predict 3): vLLM takes up to 3 speculative tokens,
    # or a multiple of 3, and refuses the rest at start-up. The bundled config names
    # Step3p7FlashForCausalLM, which vLLM does not register: its VLM class is what loads it
    def mtp(n):
        spec = replace(load_model("step-3.7-flash"),
                       architecture="Step3p7ForConditionalGeneration")
        return engine_plan("vllm", EngineRequest(
            spec=spec, context=8192, sequences=1, cache=CacheOptions(kv_k=F16, kv_v=F16, mtp=True),
            gpus=(find_gpu("h200"),) * 8, parallel=Parallel(tp=8),
            settings=EngineSettings(speculative_tokens=n)))
    for ok in (1, 2, 3, 6):
        assert f'"num_speculative_tokens": {ok}' in mtp(ok).command
    with pytest.raises(InputError, match="multiple of the model's 3 MTP layers") as e:
        mtp(4)
    assert e.value.field == "speculative_tokens"


def test_vllm_multi_module_mtp_widens_the_sliding_windows():
    # Step-3.7-Flash (window 512, 3 MTP modules) drafting 3 tokens: every sliding window keeps
    # 2 more trailing tokens (SlidingWindowSpec.extra_retained_tokens = lookahead − 1); one
    # token, or a single-module draft, keeps none
    spec = load_model("step-3.7-flash")
    sliding = [s for s in vllm._specs(spec, F16, F16, 64, True, 3) if s.kind is LayerKind.SLIDING]
    assert sliding and {s.retained for s in sliding} == {2}
    # 511 + 2 + 16,384 in flight over 64-token blocks: cdiv(16,897, 64) + 1 = 266 (265 without)
    assert sliding[0].pages_for(131072, 16384, 0) == 266
    one = [s for s in vllm._specs(spec, F16, F16, 64, True, 1) if s.kind is LayerKind.SLIDING]
    assert {s.retained for s in one} == {0} and one[0].pages_for(131072, 16384, 0) == 265


def test_vllm_warns_when_a_utilization_withholds_free_memory():
    # extensible_kv_cache.py measure_kv_cache_blocks: 0.7 < utilization < 1.0 keeping 1 GiB or
    # more of free memory out of the cache is warned about (an H200: 0.1 of 140.4 GiB, less
    # the snapshot's baseline and the 1 GiB margin the whole card would keep anyway)
    gpu = find_gpu("h200")
    r = engine_plan("vllm", req("llama-3.1-8b", gpu="h200", settings=EngineSettings(
        gpu_memory_utilization=0.9)))
    withheld = (gpu.total_bytes - vllm.BEFORE_SNAPSHOT - GiB) - math.ceil(gpu.total_bytes * 0.9)
    warned = [line for line in r.log_lines if line.startswith("gpu_memory_utilization=0.9")]
    assert warned == [f"gpu_memory_utilization=0.9 caps this instance at "
                      f"{round(math.ceil(gpu.total_bytes * 0.9) / GiB, 2)} GiB, keeping "
                      f"{round(withheld / GiB, 2)} GiB of free device memory out of the KV "
                      "cache. ..."]
    assert r.log_lines[-2].startswith("GPU KV cache size")
    assert r.log_lines[-1].startswith("Extended KV cache to")
    # 0.7 and below, or the whole card, say nothing
    for util in (0.7, None):
        quiet = engine_plan("vllm", req("llama-3.1-8b", gpu="h200", settings=EngineSettings(
            gpu_memory_utilization=util)))
        assert not any(line.startswith("gpu_memory_utilization=") for line in quiet.log_lines)


def test_launch_commands_read_the_extensible_cache_switch():
    # `vllm serve --no-enable-extensible-kv-cache` sizes the cache as releases before 0.34
    # did; the plan it reads into says so in its own command, and --enable-... is the default
    off = read_command("vllm serve Qwen/Qwen3-8B --no-enable-extensible-kv-cache "
                       "--max-model-len 8192")
    assert off.settings["no_extensible_kv_cache"] is True and not off.unread
    on = read_command("vllm serve Qwen/Qwen3-8B --no-enable-extensible-kv-cache "
                      "--enable-extensible-kv-cache --max-model-len 8192")
    assert "no_extensible_kv_cache" not in on.settings and not on.unread
    with pytest.raises(InputError, match="extensible_kv_cache is a setting of vLLM"):
        check_settings("sglang", EngineSettings(extensible_kv_cache=False))


def test_notes_say_where_tensor_parallelism_keeps_copies_of_the_cache():
    from app.common import make_query
    from kvcore.query import answer

    def notes(model, engine="vllm", gpus=8):
        return answer(make_query(load_model(model), context=8192, sequences=1, engine=engine,
                                 gpu="h200", gpus=gpus))["notes"]

    # Qwen3-30B-A3B: 4 KV heads over 8 cards, each head on 2; the engine's per-card pool
    # holds one head a card (its bytes a token × 8 = twice the table's)
    (kv,) = [n for n in notes("qwen3-30b-a3b") if "splits no KV head" in n]
    assert "4 KV heads: each head's K and V on 2 cards" in kv
    # DeepSeek-V3.2's latent and indexer keys whole on each card
    (mla,) = [n for n in notes("deepseek-v3.2", "sglang") if "whole on each" in n]
    assert "MLA latent and the indexer keys whole on each of the 8 cards: 8 copies" in mla
    # 8 KV heads over 8 cards, one card, or llama.cpp's layer split: no copies
    for args in (("llama-3.1-70b",), ("qwen3-30b-a3b", "vllm", 1),
                 ("qwen3-30b-a3b", "llama.cpp")):
        assert not any("copies" in n for n in notes(*args))


def test_trtllm_table_holds_a_float32_checkpoints_cache_in_float32():
    # TensorRT-LLM's dtype auto keeps a float32 checkpoint's cache in float32: the table's
    # bytes a token are its pool's, twice the 16-bit figure the other engines hold
    from app.common import make_query
    from kvcore.query import answer

    spec = load_model("smollm-1.7b")
    assert spec.dtype == "float32"
    tt = answer(make_query(spec, context=8192, sequences=1, engine="trtllm", gpu="4090"))
    vl = answer(make_query(spec, context=8192, sequences=1, engine="vllm", gpu="4090"))
    assert tt["bytes_per_token"] == 2 * vl["bytes_per_token"] == 24 * 32 * 64 * 2 * 4
    assert tt["engine_report"]["extra"]["bytes_per_token"] == tt["bytes_per_token"]
    assert "in float32" in tt["breakdown"][0]["stored"]
    assert vl["breakdown"][0]["stored"] is None
    # an fp8 cache is fp8 there too
    fp8 = answer(make_query(spec, context=8192, sequences=1, engine="trtllm", gpu="4090",
                            kv="fp8_e4m3"))
    assert fp8["bytes_per_token"] == 24 * 32 * 64 * 2
