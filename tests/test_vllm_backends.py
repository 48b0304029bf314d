"""vLLM 0.34.0's attention backend choice where it sets the KV-cache block size (64 by default
from 0.34.0, where 0.33.0 asked for 16).

Expected figures are worked from the release's rules (docs/ENGINES.md §V4): the backend
priority lists of platforms/cuda.py, each backend's kernel block sizes, page-size unification
and the per-request page counts of kv_cache_interface.py.
"""

from dataclasses import replace

import pytest

from kvcore import CacheOptions, InputError, find_gpu, get_format, load_model
from kvcore.engines import EngineRequest, EngineSettings, engine_plan, vllm, vllm_backends
from kvcore.model import LayerKind
from kvcore.parallel import Parallel


def cdiv(a, b):
    return -(-a // b)


def plan(model, gpu, kv, ctx, tp=1, block=None, spec=None):
    settings = EngineSettings(block_size=block) if block else EngineSettings()
    return engine_plan("vllm", EngineRequest(
        spec=spec or load_model(model), context=ctx, sequences=1,
        cache=CacheOptions(kv_k=kv, kv_v=kv), gpus=(find_gpu(gpu),),
        parallel=Parallel(tp=tp), settings=settings))


def pool_blocks(r, page, layers):
    """The blocks the extensible KV cache commits in the plan's pool bytes: ``layers`` regions of
    ``page`` bytes a block, each in whole 2 MiB granules."""
    blocks = vllm.blocks_within(r.kv_pool_bytes, page * layers, [page] * layers)
    assert (r.kv_pool_bytes - layers * (2 << 20)) // (page * layers) <= blocks
    assert blocks <= r.kv_pool_bytes // (page * layers)
    return blocks


def capacity(blocks, need, ctx):
    return (f"GPU KV cache size: {int(blocks / need * ctx):,} tokens, Maximum concurrency "
            f"for {ctx:,} tokens per request: {blocks / need:.2f}x")


def capacity_then_extended(r, blocks, need, ctx):
    """The capacity line, then the workers' commit of the final blocks (extend_kv_cache)."""
    return (r.log_lines[-2] == capacity(blocks, need, ctx)
            and r.log_lines[-1].startswith(f"Extended KV cache to {blocks} blocks ("))


# --- Gemma 4: sliding layers of 256-wide heads, global layers of 512 -------------------------

# Gemma 4 31B: 50 sliding layers (16 KV heads × 256), 10 global (4 KV heads × 512, V cached
# as well), window 1024. Groups: min(50, 10) = 10 layers each → 1 global + 5 sliding groups.
SLIDING_LAYERS, GLOBAL_LAYERS, GROUP = 50, 10, 10


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_gemma4_fp8_on_hopper_takes_64_token_blocks(gpu):
    # SM90 + fp8 + a 512-wide model head: FA3 upgrades to FA4, whose fp8 kernel reads 64-token
    # pages; the image-prefix composite TRITON_FLASH_ATTN intersects Triton's multiples of 16
    # with [64]: 64. Sliding page 64 × 16 × 512 × 1 B = 524,288; the global page per token is
    # 4 × 1024 B, half of that, so its block doubles to 128 (page-size unification)
    r = plan("gemma-4-31b-it", gpu, "fp8", 32768)
    page = 64 * 16 * 512
    assert r.block_tokens == 64 and r.extra["page_bytes"] == page == 524_288
    assert r.extra["group_size"] == GROUP
    assert r.extra["groups"] == ["full"] + ["sliding"] * 5
    blocks = pool_blocks(r, page, GROUP)
    assert r.blocks == blocks
    # H100 80 GB and H200 both take 8,192 batched tokens, two batches in flight: F = 16,384.
    # Global: cdiv(32768, 128) = 256; each sliding group cdiv(1023 + 16384, 64) + 1 = 273
    need = 256 + 5 * 273
    assert need == 1621
    assert r.max_concurrency == pytest.approx(blocks / need)
    # 64 is vLLM 0.34's default block: no "Setting kv cache block size" line
    assert not any(line.startswith("Setting kv cache block size") for line in r.log_lines)
    assert capacity_then_extended(r, blocks, need, 32768)
    assert any("TRITON_FLASH_ATTN" in n for n in r.notes)


def test_gemma4_bf16_on_hopper_takes_the_default_64():
    # a 16-bit cache: FA4 on every layer, kernel sizes multiples of 16 → the default 64 (0.33
    # asked for 16). Sliding page 64 × 16 × 512 × 2 = 1,048,576; global block 128; need as
    # fp8's: 256 + 5 × 273
    r = plan("gemma-4-31b-it", "h200", "bf16", 32768)
    assert r.block_tokens == 64 and r.extra["page_bytes"] == 1_048_576
    blocks = pool_blocks(r, 1_048_576, GROUP)
    need = 256 + 5 * 273
    assert r.blocks == blocks and r.max_concurrency == pytest.approx(blocks / need)
    assert capacity_then_extended(r, blocks, need, 32768)
    assert not any(line.startswith("Setting kv cache block size") for line in r.log_lines)


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_gemma4_on_b200_takes_triton_flashinfer_64(kv):
    # SM10x with image prefixes: TRITON_FLASHINFER first, kernel_block_sizes (64,), whatever
    # the cache dtype. B200 (≥ 160 GiB): 16,384 batched tokens, F = 32,768, so a sliding group
    # holds cdiv(min(1023 + 32768, 32768), 64) + 1 = 513 blocks, the global cdiv(32768, 128)
    width = 2 if kv == "bf16" else 1
    r = plan("gemma-4-31b-it", "b200", kv, 32768)
    page = 64 * 16 * 512 * width
    assert r.block_tokens == 64 and r.extra["page_bytes"] == page
    blocks = pool_blocks(r, page, GROUP)
    need = 256 + 5 * 513
    assert r.blocks == blocks and capacity_then_extended(r, blocks, need, 32768)
    assert r.log_lines[0].startswith("Available KV cache memory")


@pytest.mark.parametrize("gpu,kv,name,block", [
    ("h200", "fp8", "FLASH_ATTN", 64),   # no image prefix: FLASH_ATTN's own [64]
    ("h200", "bf16", None, 64),
    ("b200", "fp8", None, 64),           # FLASHINFER first, takes 64 (16/32/64 kernels)
    ("b200", "bf16", None, 64),
])
def test_text_only_gemma4(gpu, kv, name, block):
    spec = replace(load_model("gemma-4-31b-it"), mm_prefix=False)
    choice = vllm_backends.select(spec, find_gpu(gpu), get_format(kv))
    assert (choice.backend.name if choice else None) == name
    assert vllm.default_block(spec, find_gpu(gpu), get_format(kv)) == block


@pytest.mark.parametrize("gpu", ["a100", "rtx-5090"])
@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_gemma4_without_fa4_is_forced_to_triton(gpu, kv):
    # no FlashAttention 4 on SM80 / SM120: Gemma4Config forces TRITON_ATTN (multiples of 16,
    # so the default 64)
    for model in ("gemma-4-31b-it", "gemma-4-26b-a4b"):
        choice = vllm_backends.select(load_model(model), find_gpu(gpu), get_format(kv))
        assert choice is not None and choice.backend.name == "TRITON_ATTN"
        assert vllm.default_block(load_model(model), find_gpu(gpu), get_format(kv)) == 64


def test_gemma4_26b_fp8_on_h200():
    # 25 sliding layers (8 × 256), 5 global (2 × 512): groups of 5, 1 global + 5 sliding;
    # page 64 × 8 × 512 = 262,144; need as for the 31B: 256 + 5 × 273
    r = plan("gemma-4-26b-a4b", "h200", "fp8", 32768)
    assert r.block_tokens == 64 and r.extra["page_bytes"] == 262_144
    assert r.extra["group_size"] == 5
    blocks = pool_blocks(r, 262_144, 5)
    assert r.blocks == blocks and capacity_then_extended(r, blocks, 1621, 32768)


def test_block_size_a_backend_refuses_moves_selection_down():
    # --block-size 16 with an fp8 cache on an H200: TRITON_FLASH_ATTN wants multiples of 64;
    # FLASH_ATTN (fp8 + image prefix) and FLASHINFER (image prefix) are out for other
    # reasons, so vLLM's warning names only TRITON_FLASH_ATTN, and TRITON_ATTN runs
    r = plan("gemma-4-31b-it", "h200", "fp8", 32768, block=16)
    assert r.block_tokens == 16 and "--block-size 16" in r.command
    assert r.log_lines[0].startswith("--block-size 16 precluded higher-priority backend(s) "
                                     "TRITON_FLASH_ATTN. Using TRITON_ATTN instead")
    r = plan("gemma-4-31b-it", "h200", "fp8", 32768, block=128)
    assert r.block_tokens == 128 and "precluded" not in r.log_lines[0]
    with pytest.raises(InputError, match="multiple of 16"):
        plan("gemma-4-31b-it", "h200", "fp8", 32768, block=24)


# --- MLA on SM100 -----------------------------------------------------------------------------

@pytest.mark.parametrize("kv,width", [("bf16", 2), ("fp8", 1)])
def test_deepseek_v3_on_b200_takes_flashinfer_mla_64(kv, width):
    # qk_nope_head_dim 128 ∈ {64, 128, 192}, latent 512 + 64 = 576: FLASHINFER_MLA, kernel
    # sizes [32, 64] → the default 64 (0.33: 32, its smallest when 16 was asked). 61 layers
    # (the MTP layer not planned) × 64 × 576 × width bytes a block; a 10,000-token request
    # holds cdiv(10000, 64) = 157 blocks
    r = plan("deepseek-v3", "b200", kv, 10000, tp=8)
    page = 64 * 576 * width
    assert r.block_tokens == 64 and r.extra["page_bytes"] == page
    blocks = pool_blocks(r, page, 61)
    assert r.blocks == blocks and r.max_concurrency == pytest.approx(blocks / 157)
    assert r.log_lines[0].startswith("Available KV cache memory")
    assert capacity_then_extended(r, blocks, 157, 10000)
    assert any("FLASHINFER_MLA" in n for n in r.notes)


def test_deepseek_v2_lite_on_b200():
    # 27 MLA layers, fp8: 27 × 64 × 576 bytes a block; 157 blocks a 10,000-token request
    r = plan("deepseek-v2-lite-chat", "b200", "fp8", 10000)
    blocks = pool_blocks(r, 64 * 576, 27)
    assert r.block_tokens == 64 and r.blocks == blocks
    assert capacity_then_extended(r, blocks, 157, 10000)


def test_qk_nope_head_dim_outside_flashinfer_mla_gives_cutlass_128():
    # FlashInfer MLA refuses qk_nope_head_dim 96: CUTLASS_MLA, kernel block [128]
    spec = replace(load_model("deepseek-v2-lite-chat"), qk_nope_head_dim=96)
    r = plan(None, "b200", "bf16", 10000, spec=spec)
    assert r.block_tokens == 128
    blocks = pool_blocks(r, 128 * 576 * 2, 27)
    assert r.blocks == blocks and capacity_then_extended(r, blocks, cdiv(10000, 128), 10000)
    assert r.log_lines[0] == "Setting kv cache block size to 128 for CUTLASS_MLA backend(s)."
    # on Hopper the dense backends do not read qk_nope_head_dim
    assert vllm.default_block(spec, find_gpu("h200"), get_format("bf16")) == 64


def test_latent_outside_the_mla_head_sizes_gives_triton_mla():
    # MLACommonBackend takes latents of 320, 512 or 576 values; TRITON_MLA any
    base = load_model("deepseek-v2-lite-chat")
    spec = replace(base, groups=tuple(replace(g, head_dim_k=544) if g.kind is LayerKind.MLA
                                      else g for g in base.groups))
    choice = vllm_backends.select(spec, find_gpu("b200"), get_format("bf16"))
    assert choice is not None and choice.backend.name == "TRITON_MLA"
    assert vllm.default_block(spec, find_gpu("b200"), get_format("bf16")) == 64


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-r1", "kimi-k2-instruct",
                                   "deepseek-v2-lite-chat"])
@pytest.mark.parametrize("gpu", ["b200", "b300"])
@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_catalog_mla_on_sm10x(model, gpu, kv):
    assert vllm.default_block(load_model(model), find_gpu(gpu), get_format(kv)) == 64


@pytest.mark.parametrize("kv,passed", [
    ("bf16", "FLASHINFER_MLA, CUTLASS_MLA"),
    # TOKENSPEED_MLA (fp8, DeepSeek-R1 dimensions) is refused by the block size alone too
    ("fp8", "FLASHINFER_MLA, TOKENSPEED_MLA, CUTLASS_MLA"),
])
def test_mla_block_size_16_on_b200_falls_to_triton_mla(kv, passed):
    r = plan("deepseek-v3", "b200", kv, 10000, tp=8, block=16)
    assert r.block_tokens == 16
    assert r.log_lines[0].startswith(f"--block-size 16 precluded higher-priority backend(s) "
                                     f"{passed}. Using TRITON_MLA instead")
    # 64 is one of FLASHINFER_MLA's sizes: no warning
    r = plan("deepseek-v3", "b200", kv, 10000, tp=8, block=64)
    assert r.block_tokens == 64 and not r.log_lines[0].startswith("--block-size")


# --- an nvfp4 cache: FLASHINFER is the only backend that stores it ---------------------------

def test_gemma4_nvfp4_on_b200_has_no_backend():
    # SM10x, image-prefix model: TRITON_FLASHINFER (Triton half lists no nvfp4), FLASHINFER
    # (supports_mm_prefix False), FLASH_ATTN, TRITON_ATTN, FLEX_ATTENTION, TURBOQUANT (no
    # nvfp4 in their supported_kv_cache_dtypes): none valid, vLLM raises at start-up
    with pytest.raises(InputError) as e:
        plan("gemma-4-31b-it", "b200", "nvfp4", 32768)
    assert e.value.field == "kv_k"
    assert "FLASHINFER" in str(e.value) and "image-prefix" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_gemma4_nvfp4_on_hopper_has_no_backend(gpu):
    # SM90 takes FA4 too (Gemma4Config sets flash_attn_version 4, no backend forced); the list
    # TRITON_FLASH_ATTN, FLASH_ATTN, FLASHINFER, TRITON_ATTN, ... again leaves only FLASHINFER
    # for nvfp4, which refuses the image prefix
    with pytest.raises(InputError, match="image-prefix"):
        plan("gemma-4-31b-it", gpu, "nvfp4", 32768)


def test_gemma4_nvfp4_without_fa4_names_the_forced_triton():
    # SM120: no FA4, Gemma4Config selects TRITON_ATTN, whose dtypes hold no nvfp4 ("Selected
    # backend TRITON_ATTN is not valid")
    with pytest.raises(InputError, match="TRITON_ATTN"):
        plan("gemma-4-31b-it", "rtx-5090", "nvfp4", 8192)


def test_text_only_gemma4_nvfp4_on_b200_runs_flashinfer_64():
    # without the image prefix FLASHINFER (first on SM10x) takes nvfp4 on SM100 (trtllm-gen):
    # the default 64. Sliding page: 64 tokens × 16 heads × (256 / 2 + 256 / 16) B × 2 (K, V)
    # = 294,912; the global layers' 4 × (512 / 2 + 512 / 16) × 2 = 2,304 B a token is half a
    # sliding token's 4,608, so their block doubles to 128 with the same page
    spec = replace(load_model("gemma-4-31b-it"), mm_prefix=False)
    assert vllm_backends.select(spec, find_gpu("b200"), get_format("nvfp4")) is None
    r = plan(None, "b200", "nvfp4", 32768, spec=spec)
    assert r.block_tokens == 64 and r.extra["page_bytes"] == 294_912


@pytest.mark.parametrize("gpu", ["b200", "h100", "rtx-5090"])
def test_dense_nvfp4_takes_64_token_blocks(gpu):
    # Llama-3.1-8B: 128-wide heads, no image prefix: FLASHINFER takes nvfp4 on SM10x and
    # (its FA2 writer) on SM90 and SM12x, 64 tokens a block; page 64 × 8 × (64 + 8) × 2 = 73,728
    assert vllm_backends.select(load_model("llama-3.1-8b"), find_gpu(gpu),
                                get_format("nvfp4")) is None
    r = plan("llama-3.1-8b", gpu, "nvfp4", 8192)
    assert r.block_tokens == 64 and r.extra["page_bytes"] == 73_728


def test_head_size_64_nvfp4_only_on_sm10x():
    # FlashInferBackend.supports_combination on SM8x/9x/12x: "fa2 prefill misreads an NVFP4
    # KV cache at head_size 64" (gpt-oss's heads); SM10x runs trtllm-gen and takes it
    with pytest.raises(InputError, match="head size 64"):
        plan("gpt-oss-20b", "h200", "nvfp4", 8192)
    assert plan("gpt-oss-20b", "b200", "nvfp4", 8192).block_tokens == 64


def test_nvfp4_refusal_exits_2_on_the_cli(capsys):
    from app.cli import main

    code = main(["gemma-4-31b-it", "--engine", "vllm", "--gpu", "b200", "--kv", "nvfp4",
                 "--ctx", "32k"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "nvfp4" in err


@pytest.mark.parametrize("kv", ["nvfp4", "fp8_e5m2", "fp8_pth"])
@pytest.mark.parametrize("gpu", ["h200", "b200", "a100"])
def test_mla_cache_dtypes_no_backend_stores(kv, gpu):
    # the dense MLA backends list 16-bit and fp8 (e4m3) caches only: vLLM starts with none
    spec = load_model("deepseek-v2-lite-chat")
    with pytest.raises(InputError) as e:
        engine_plan("vllm", EngineRequest(spec=spec, context=8192, sequences=1,
                                          cache=CacheOptions(kv_k=kv, kv_v=kv),
                                          gpus=(find_gpu(gpu),)))
    assert e.value.field == "kv_k" and "\n" not in str(e.value)
    assert f"no MLA attention backend for the {kv} KV cache" in str(e.value)
    for ok in ("bf16", "fp8_e4m3"):
        assert engine_plan("vllm", EngineRequest(spec=spec, context=8192, sequences=1,
                                                 cache=CacheOptions(kv_k=ok, kv_v=ok),
                                                 gpus=(find_gpu(gpu),))).fits


@pytest.mark.parametrize(("gpu", "mbt"), [("rtx-4090", 2496), ("a100", 2496), ("h100", 8192)])
def test_gemma4_batches_hold_its_largest_video(gpu, mbt):
    # engine/arg_utils.py _get_min_mm_batched_tokens: a prefix-LM model's largest item must fit
    # one batch; Gemma 4's is a video of 32 frames × (70 soft + boi + eoi + 6 timestamp
    # tokens) = 2,496, above the 2,048 of cards under 70 GiB and A100s
    r = plan("gemma-4-31b-it", gpu, "bf16", 32768)
    assert r.extra["in_flight_tokens"] == 2 * mbt
    raised = [line for line in r.log_lines if line.startswith("Raising")]
    assert raised == (["Raising max_num_batched_tokens from 2048 to 2496 to accommodate "
                       "'video' input for prefix-LM model google/gemma-4-31B-it."]
                      if mbt == 2496 else [])
    # text only (--language-model-only): no tower, no floor
    text = engine_plan("vllm", EngineRequest(
        spec=load_model("gemma-4-31b-it"), context=32768, sequences=1,
        cache=CacheOptions(kv_k="bf16", kv_v="bf16"), gpus=(find_gpu(gpu),),
        settings=EngineSettings(language_model_only=True)))
    assert text.extra["in_flight_tokens"] == 2 * min(mbt, 2048 if mbt == 2496 else mbt)


# --- --attention-backend: a backend named (engines/vllm_backends.py forced) ------------------

def named(model, gpu, kv, backend, ctx=32768, gpus=1, block=None, **settings):
    return engine_plan("vllm", EngineRequest(
        spec=load_model(model), context=ctx, sequences=1, cache=CacheOptions(kv_k=kv, kv_v=kv),
        gpus=(find_gpu(gpu),) * gpus, parallel=Parallel(tp=gpus),
        settings=EngineSettings(attention_backend=backend, block_size=block, **settings)))


def test_cutlass_mla_named_on_b200_pages_128_tokens_where_vllm_picks_flashinfer_mla():
    # DeepSeek-R1 on SM100: FLASHINFER_MLA by priority (32/64 → 64); CUTLASS_MLA named takes
    # [128] only, get_preferred_block_size(64) → 128, and the pool holds whole 128-token blocks
    own = named("deepseek-r1", "b200", "bf16", None, gpus=8)
    cut = named("deepseek-r1", "b200", "bf16", "cutlass_mla", gpus=8)
    assert own.block_tokens == 64 and cut.block_tokens == 128
    assert cut.log_lines[0] == "Setting kv cache block size to 128 for CUTLASS_MLA backend(s)."
    assert "--attention-backend CUTLASS_MLA" in cut.command
    assert any("--attention-backend CUTLASS_MLA: vLLM runs it" in n and "blocks of 128 tokens"
               in n for n in cut.notes)
    # the same bytes a token: half the blocks of twice the tokens (a block rounds them)
    assert abs(cut.blocks * 128 - own.blocks * 64) <= 128
    assert cut.extra["page_bytes"] == 2 * own.extra["page_bytes"]


@pytest.mark.parametrize(("model", "gpu", "kv", "backend"), [
    ("llama-3.1-8b", "h100", "bf16", "FLASHINFER"),
    ("llama-3.1-8b", "h100", "fp8_e4m3", "FLASH_ATTN"),
    ("llama-3.1-8b", "4090", "fp8_e4m3", "triton_attn"),
    ("llama-3.1-8b", "4090", "fp8_pth", "TRITON_ATTN"),
    ("mistral-7b-v0.1", "a100", "bf16", "FLEX_ATTENTION"),
    ("deepseek-r1", "h200", "fp8_e4m3", "FLASHMLA"),
    ("deepseek-v2-lite-chat", "4090", "bf16", "TRITON_MLA"),
    ("qwen3.5-27b", "h100", "bf16", "FLASHINFER"),
])
def test_a_backend_that_takes_the_model_plans_its_64_token_blocks(model, gpu, kv, backend):
    # the backend vLLM picks itself pages 64 tokens here too: the same pool, the flag printed
    own, it = named(model, gpu, kv, None), named(model, gpu, kv, backend)
    assert it.block_tokens == own.block_tokens
    assert (it.blocks, it.max_context) == (own.blocks, own.max_context)
    assert f"--attention-backend {backend.upper()}" in it.command
    assert any(n.startswith(f"--attention-backend {backend.upper()}: vLLM runs it")
               for n in it.notes)


@pytest.mark.parametrize(("model", "gpu", "kv", "backend", "reason"), [
    ("llama-3.1-8b", "a100", "fp8_e4m3", "FLASH_ATTN", "FP8 KV requires FA3 (SM90)"),
    ("llama-3.1-8b", "5090", "fp8_e4m3", "FLASH_ATTN", "FP8 KV requires FA3 (SM90)"),
    ("gemma-2-9b", "4090", "bf16", "FLEX_ATTENTION", "does not support logits soft cap"),
    ("llama-3.1-8b", "h100", "fp8_e4m3", "FLEX_ATTENTION", "'kv_cache_dtype not supported'"),
    ("phi-3-mini-4k-instruct", "4090", "bf16", "FLASHINFER", "'head_size not supported'"),
    ("llama-3.1-8b", "2080-ti", "bf16", "FLASHINFER", "'compute capability not supported'"),
    ("llama-3.1-8b", "3090", "fp8_e4m3", "TRITON_ATTN", "native FP8 requires SM89+"),
    ("llama-3.1-8b", "h100", "nvfp4", "TRITON_ATTN", "'kv_cache_dtype not supported'"),
    ("llama-3.1-8b", "h100", "bf16", "CUTLASS_MLA", "'non-MLA not supported'"),
    ("deepseek-r1", "h100", "bf16", "FLASH_ATTN", "'MLA not supported'"),
    ("deepseek-r1", "b200", "bf16", "FLASHMLA", "only supported on Hopper"),
    ("deepseek-r1", "h100", "fp8_e4m3", "FLASH_ATTN_MLA", "'kv_cache_dtype not supported'"),
    ("deepseek-r1", "h100", "bf16", "CUTLASS_MLA", "'compute capability not supported'"),
    ("deepseek-r1", "b200", "bf16", "TOKENSPEED_MLA", "'kv_cache_dtype not supported'"),
    ("llama-3.1-8b", "h100", "tq_4bit", "TURBOQUANT", "TurboQuant's boundary layers"),
    ("llama-3.1-8b", "h100", "tq_4bit", "FLASH_ATTN", "TurboQuant caches run on TURBOQUANT"),
    ("gemma-3-27b-it", "h100", "bf16", "FLASHINFER", "partial multimodal token full attention"),
    ("mistral-7b-v0.1", "h100", "bf16", "TURBOQUANT", "'kv_cache_dtype not supported'"),
])
def test_a_backend_that_refuses_the_model_is_refused_as_vllm_refuses_it(model, gpu, kv, backend,
                                                                         reason):
    # get_attn_backend_cls validates the named backend alone and raises: no fallback
    with pytest.raises(InputError) as e:
        named(model, gpu, kv, backend, gpus=8 if model == "deepseek-r1" else 1)
    assert e.value.field == "attention_backend"
    assert f"\"Selected backend {backend} is not valid for this configuration." in str(e.value)
    assert reason in str(e.value)


def test_a_named_backend_checks_the_layers_kept_at_the_models_dtype_and_the_block_size():
    # TOKENSPEED_MLA takes an fp8 cache only; TurboQuant's boundary layers (bf16) have no
    # path in TURBOQUANT, but a skipped layer beside fp8 has one in FLASHINFER
    ok = named("deepseek-r1", "b200", "fp8_e4m3", "TOKENSPEED_MLA", gpus=8)
    assert ok.block_tokens == 64
    skip = named("llama-3.1-8b", "h100", "fp8_e4m3", "FLASHINFER",
                 kv_cache_dtype_skip_layers="0,31")
    assert skip.block_tokens == 64 and "--kv-cache-dtype-skip-layers 0 31" in skip.command
    # CUTLASS_MLA's kernels take multiples of 128 only
    with pytest.raises(InputError, match="multiples of 128, not 64") as e:
        named("deepseek-r1", "b200", "bf16", "CUTLASS_MLA", gpus=8, block=64)
    assert e.value.field == "block_size"
    assert named("deepseek-r1", "b200", "bf16", "CUTLASS_MLA", gpus=8, block=256).block_tokens == 256
    # every card of a mixed layout is checked
    mixed = EngineRequest(spec=load_model("llama-3.1-8b"), context=8192, sequences=1,
                          cache=CacheOptions(kv_k="fp8_e4m3", kv_v="fp8_e4m3"),
                          gpus=(find_gpu("h100"), find_gpu("a100")), parallel=Parallel(tp=2),
                          settings=EngineSettings(attention_backend="FLASH_ATTN"))
    with pytest.raises(InputError, match="on NVIDIA A100"):
        engine_plan("vllm", mixed)


@pytest.mark.parametrize(("model", "gpu", "backend", "words"), [
    ("gpt-oss-20b", "h100", "FLEX_ATTENTION", "against gpt_oss's attention"),
    ("gemma-4-31b-it", "h100", "FLASH_ATTN", "against gemma4_text's attention"),
    ("llama-3.1-8b", "h100", "B12X", "does not check this backend"),
    ("llama-3.1-8b", "mi300x", "FLASH_ATTN", "a card of another vendor"),
    ("gemma-2-9b", "b200", "FLASH_ATTN", "a head of 256 or more on SM10x"),
    ("deepseek-v3.2", "h200", "FLASHMLA_SPARSE", "does not check this backend"),
    ("deepseek-v3.2", "h200", "FLASHMLA", "sparse attention"),
    ("llama-3.1-8b", "h100", "triton_msa", "MiniMax-M3's decode kernel"),
])
def test_a_backend_kvplan_does_not_check_plans_vllms_own_pick_with_a_note(model, gpu, backend,
                                                                          words):
    gpus = 8 if model == "deepseek-v3.2" else 1
    own, it = named(model, gpu, "bf16", None, gpus=gpus), named(model, gpu, "bf16", backend,
                                                               gpus=gpus)
    assert (it.block_tokens, it.blocks) == (own.block_tokens, own.blocks)
    assert any(words in n and "vLLM's own pick" in n for n in it.notes), it.notes


def test_backend_names_are_read_as_vllm_reads_them():
    assert vllm_backends.backend_name("flashinfer") == "FLASHINFER"
    assert vllm_backends.backend_name(" Auto ") is None
    assert vllm_backends.backend_name(None) is None
    with pytest.raises(InputError, match="no attention backend 'flash-attn'") as e:
        vllm_backends.backend_name("flash-attn")
    assert "FLASH_ATTN, " in str(e.value) and "TORCH_SDPA" not in str(e.value)
    with pytest.raises(InputError, match="not a DeepSeek V4 attention backend"):
        named("deepseek-v4-flash", "b200", "bf16", "flashinfer_mla_sparse", ctx=8192, gpus=8)
    dsv4 = named("deepseek-v4-flash", "b200", "bf16", "FLASHMLA_SPARSE_DSV4", ctx=8192, gpus=8)
    assert any("kvplan does not check it against DeepSeek-V4" in n for n in dsv4.notes)
