"""SGLang allocation rules.

Sources read (sgl-project/sglang): ``python/sglang/srt/server_args.py``
(``_handle_gpu_memory_settings``: ``mem_fraction_static`` from reserved memory, at least 10 GiB
reserved on cards over 60 GB), ``python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py``
(``profile_max_num_token``: rest = free after weights − free before loading × (1 −
mem_fraction_static); tokens = rest // cell size, rounded down to the page; cell = KV heads per
attention-TP rank × (K + V head dims) × layers × dtype bytes, MLA one latent), and
``mem_cache/memory_pool.py`` (each K and V buffer holds tokens + page_size rows; sizes printed in
GB of 2^30 bytes). DeepSeek Sparse Attention: ``NSATokenToKVPool`` / ``DSATokenToKVPool`` (an
MLA pool plus a 132-byte fp8 indexer key a token in every layer, 64-token pages),
``calculate_mla_kv_cache_dim`` (the latent row) and the DSA defaults of ``server_args.py`` /
``arg_groups/overrides.py`` (page 64, ``auto`` → bfloat16 below SM100).
"""

from __future__ import annotations

from ..errors import InputError
from ..gpus import GPU
from ..kv import CacheOptions, kv_row_bytes
from ..model import LayerKind, ModelSpec
from ..parallel import sglang_stage_layers
from ..plan import largest
from .base import (
    EngineReport,
    EngineRequest,
    GiB,
    MiB,
    RankShare,
    model_ref,
    need_gpu,
    parallel_flags,
    rank_weights,
    refuse_architecture,
    refuse_layout,
    refuse_nas_layout,
    single_format,
)

NAME = "sglang"
#: architectures SGLang cannot load, by model_type: no module in python/sglang/srt/models
#: registers them as an EntryClass (the MiniMax-Text-01/M1 ports, PRs #8124 and #11466, were
#: closed unmerged), and their remote code's lightning attention is not one the Transformers
#: fallback can page
UNSUPPORTED = {
    "minimax_m1": ("MiniMaxM1ForCausalLM",
                   "no SGLang model implements lightning attention; vllm==0.23.0 or llama.cpp "
                   "runs it"),
    "minimax_text_01": ("MiniMaxText01ForCausalLM",
                        "no SGLang model implements lightning attention; vllm==0.23.0 or "
                        "llama.cpp runs it"),
}
#: models whose pool layout in SGLang could not be read from its source, by model_type:
#: ModelConfig._derive_model_shapes (configs/model_config.py) gives the full-attention pool
#: head_dim and num_key_value_heads, and Gemma 4's full layers are global_head_dim ×
#: num_global_key_value_heads; is_hybrid_swa_model lists Step3p5ForCausalLM, not Step-3.7's
#: architectures
LAYOUT_UNKNOWN = {
    "gemma4": "Gemma 4's full-attention pool (global_head_dim, num_global_key_value_heads)",
    "gemma4_text": "Gemma 4's full-attention pool (global_head_dim, num_global_key_value_heads)",
    "step3p7": "whether SGLang gives Step-3.7 a sliding-window pool",
}
#: by architecture: Kimi-K3 runs through models/kimi_k3.py, and whether its architecture takes
#: the Mamba extra_buffer slots (arg_groups/overrides.py _MAMBA_EXTRA_BUFFER_ARCHS lists
#: KimiLinearForCausalLM only) is not in the source read
LAYOUT_UNKNOWN_ARCH = {
    "KimiK3ForConditionalGeneration": "how many KDA state slots SGLang gives a Kimi-K3 request "
                                      "(extra_buffer or not)",
}
#: --pp: the remainder of the layers goes to the last stages (distributed/utils.py get_pp_indices)
STAGE_SPLIT = sglang_stage_layers
FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
#: CUDA context and NCCL before weights load (seen: 22.49 GiB L4 → 21.63 GiB free)
PRELOAD = int(0.86 * GiB)


def _table(gpu_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) defaults by card size."""
    big_tp = tp >= 4
    if gpu_mib < 20 * 1024:
        return 2048, 8
    if gpu_mib < 35 * 1024:
        return 2048, 80 if big_tp else 24
    if gpu_mib < 60 * 1024:
        return 4096, 160 if big_tp else 32
    if gpu_mib < 160 * 1024:
        return 8192, 512 if big_tp else 256
    return 16384, 512


def vision_factor(layers: int, hidden: int) -> float:
    """What SGLang multiplies an automatic mem_fraction_static by for a model with a vision
    encoder (server_args adjust_mem_fraction_for_vlm): 0.95, times 1 − 0.1 per doubling of
    the encoder's layers × hidden² over ViT-L/14's (24 × 1024²), kept within 0.8-1.05."""
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def auto_mem_fraction(gpu_bytes: int, tp: int, pp: int, chunked: int | None = None) -> float:
    gpu_mib = gpu_bytes / MiB
    default_chunk, graph_bs = _table(gpu_mib, tp)
    chunk = chunked or default_chunk
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


#: share of full-layer tokens the sliding-window pool holds (server_args swa_full_tokens_ratio)
SWA_RATIO = 0.8
#: model types SGLang gives a separate sliding-window pool (configs/model_config.py
#: is_hybrid_swa_model: Llama4, GptOss, MiMoV2, Step3p5, Gemma4); every other model with
#: sliding or chunked layers (Gemma 2 and 3, Mistral, Phi-3, ...) gets one pool in which every
#: layer holds every token
HYBRID_SWA_TYPES = frozenset({"llama4", "llama4_text", "gpt_oss", "mimo_v2_flash", "step3p5",
                              "gemma4", "gemma4_text"})
#: Mamba pool : KV pool memory ratio (server_args mamba_full_memory_ratio)
MAMBA_RATIO = 0.9
#: SSM state dtype bytes where the config names no mamba_ssm_dtype (configs/mamba_utils.py
#: mamba2_state_dtype: the config's mamba_ssm_dtype, else float32)
MAMBA_SSM_BYTES = 4
#: model types whose mamba_radix_cache_strategy "auto" resolves to "extra_buffer" with the
#: default overlap scheduler and triton linear-attention backend (arg_groups/overrides.py
#: _mamba_radix_cache_resolution, _MAMBA_EXTRA_BUFFER_ARCHS); the rest get "no_buffer"
EXTRA_BUFFER_TYPES = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe",
                                "qwen3_5_moe_text", "kimi_linear", "nemotron_h", "falcon_h1",
                                "granitemoehybrid"})
#: Mamba slots a running request may hold: 3, plus the two ping-pong track slots of
#: extra_buffer with the overlap scheduler (model_runner_kv_cache_mixin
#: _calculate_mamba_ratio)
SLOTS_PER_REQUEST = 3
EXTRA_BUFFER_SLOTS = 2


#: DeepSeek Sparse Attention: the NSA/DSA pool asserts 64-token pages on CUDA and server_args
#: forces them, whatever --page-size says
DSA_PAGE = 64
#: the latent the pool's fp8 layout is written for (kv_lora_rank 512 + qk_rope_head_dim 64)
DSA_LATENT = 576
#: calculate_mla_kv_cache_dim under fp8_e4m3 with a FlashMLA backend: 512 fp8 values, one fp32
#: scale per 128 (quant_block_size), 64 bf16 rope values (rope_storage_dtype)
FP8_DSA_ROW = 512 + 512 // 128 * 4 + 64 * 2
#: the indexer key the pool asserts (index_head_dim 128), stored as uint8 fp8 values plus one
#: fp32 scale per 128: index_head_dim + index_head_dim // 128 × 4 bytes a token and layer
DSA_INDEX_WIDTH = 128
DSA_INDEX_ROW = DSA_INDEX_WIDTH + DSA_INDEX_WIDTH // 128 * 4


def dsa_dtype(spec: ModelSpec, gpu: GPU | None, opts: CacheOptions) -> tuple[str | None, int]:
    """For a DeepSeek Sparse Attention model: the --kv-cache-dtype kvplan passes (None: auto)
    and the bytes of the dtype SGLang then runs, or a one-line refusal of what is not sized.

    ``--kv f16`` stands for SGLang's auto, which a DSA model resolves by the card: bfloat16
    below SM100, fp8_e4m3 from it. An fp8 latent is sized on Hopper only: there the default
    backends (flashmla_kv) keep FlashMLA's 656-byte row, while on Blackwell older releases
    chose flashmla too and newer ones trtllm, which keeps a plain 576-byte row."""
    width = next(g.head_dim_k for g in spec.groups if g.kind is LayerKind.MLA)
    index = next(g.head_dim_k for g in spec.groups if g.kind is LayerKind.INDEXER)
    if width != DSA_LATENT or index != DSA_INDEX_WIDTH:
        raise InputError(f"SGLang's DSA pool takes a {DSA_LATENT}-value latent and a "
                         f"{DSA_INDEX_WIDTH}-value indexer key; this model's are {width} and "
                         f"{index}", field="engine")
    name = opts.kv_k.name
    if name not in ("f16", "bf16", "fp8_e4m3"):
        raise InputError(f"SGLang runs DeepSeek Sparse Attention with --kv-cache-dtype auto, "
                         f"bfloat16 or fp8_e4m3, not {name}", field="kv_k")
    family = gpu.cuda_family if gpu is not None else None
    if gpu is not None and family not in (9, 10):
        raise InputError(f"SGLang's DSA pool is sized here on Hopper (sm90) and Blackwell "
                         f"(sm100) cards, not on {gpu.name}", field="gpu")
    if name == "bf16":
        return "bfloat16", 2
    if family is None:
        raise InputError("SGLang picks a DSA model's KV dtype and fp8 layout by the card: give "
                         "a --gpu, or --kv bf16 with a KV budget", field="gpu")
    if name == "f16" and family == 9:
        return None, 2
    if family == 9:
        return "fp8_e4m3", 1
    raise InputError("SGLang's fp8 DSA latent on Blackwell is 656 bytes a token and layer "
                     "(FlashMLA) in older releases and 576 (trtllm, the newer default): not "
                     "sized; choose --kv bf16", field="kv_k")


def dsa_pool_bytes(tokens: int, layers: int, row: int) -> int:
    """Bytes SGLang's DSA pool allocates for ``tokens`` (a multiple of the page) over
    ``layers`` layers with a latent row of ``row`` bytes: tokens + one page of latent rows and
    (tokens + page + 1) // page indexer pages of page × 132 bytes in each layer."""
    latent = (tokens + DSA_PAGE) * row
    index = (tokens + DSA_PAGE + 1) // DSA_PAGE * DSA_PAGE * DSA_INDEX_ROW
    return layers * (latent + index)


def slots_per_request(model_type: str) -> int:
    """Mamba state slots SGLang reserves per running request for this model."""
    extra = EXTRA_BUFFER_SLOTS if model_type in EXTRA_BUFFER_TYPES else 0
    return SLOTS_PER_REQUEST + extra


def kv_budget(req: EngineRequest, shares: list[RankShare]) -> tuple[int, int | None, float | None]:
    """(bytes left for the KV pools, weights + KV budget, mem_fraction_static) of the most
    loaded rank: rest = free after weights − free before loading × (1 − mem_fraction_static)
    (model_runner_kv_cache_mixin profile_max_num_token)."""
    s, p = req.settings, req.parallel
    frac = s.mem_fraction_static
    gpu = shares[0].gpu
    if req.kv_budget_bytes is not None:
        return req.kv_budget_bytes, None, frac
    if gpu is None:
        raise need_gpu()
    total = gpu.total_bytes
    if frac is None:
        frac = auto_mem_fraction(total, p.tp, p.pp, s.chunked_prefill_size)
        if req.spec.vision_encoder:
            frac *= vision_factor(*req.spec.vision_encoder)
    before = total - PRELOAD - (int(0.3 * GiB) if p.ranks_per_replica > 1 else 0)
    after = before - max(sh.weights_bytes for sh in shares)
    return int(after - before * (1 - frac)), int(before * frac), frac


def plan(req: EngineRequest) -> EngineReport:
    refuse_architecture("SGLang", req.spec, UNSUPPORTED)
    # its DeciLMForCausalLM numbers attention by the decoder layer, but whether the token
    # pool then holds the no-op layers too is not established
    refuse_nas_layout("SGLang", req.spec, always="the token pool's layers for no-op blocks "
                      "are not established")
    refuse_layout("SGLang", req.spec, LAYOUT_UNKNOWN, LAYOUT_UNKNOWN_ARCH)
    if any(g.kind is LayerKind.COMPRESSED for g in req.spec.groups):
        from .sglang_dsv4 import plan as dsv4_plan
        return dsv4_plan(req)
    s, opts = req.settings, req.cache
    k_name = single_format(NAME, opts, FORMATS)
    dsa = any(g.kind is LayerKind.INDEXER for g in req.spec.groups)
    dsa_flag: str | None = None
    dsa_bytes = 0
    if dsa:
        gpu0 = req.gpus[0] if req.gpus else None
        dsa_flag, dsa_bytes = dsa_dtype(req.spec, gpu0, opts)
        k_name = dsa_flag or "auto"
    sliding = (req.spec.model_type in HYBRID_SWA_TYPES
               and any(g.kind in (LayerKind.SLIDING, LayerKind.CHUNKED) for g in req.spec.groups))
    note_hybrid = ""
    p = req.parallel
    page = DSA_PAGE if dsa else (s.page_size or 1)
    # --dtype auto serves a float32 checkpoint in 16 bits (FP16 for FP32 models; Gemma-2 and
    # Gemma-3, which overflow in FP16, in BF16): 2 bytes a weight either way
    weights, shares = rank_weights(req, STAGE_SPLIT, f32_as="bf16")
    # every rank sizes its pool from the free memory of the most loaded rank (a world-group
    # minimum) over its own layers' cell; the pipeline keeps the smallest pool, the stage
    # with the most KV layers (model_runner_kv_cache_mixin profile_max_num_token)
    if dsa:
        # the profiler's cell (get_cell_size_per_token / _compute_cell_size): the 576-value
        # latent at the dtype's bytes and the 132-byte indexer key in every layer of the
        # stage, shared-indexer layers included (the pool allocates them too)
        rows = [(sum(g.count for g in sh.spec.groups_for(mtp=False) if g.kind is LayerKind.MLA)
                 * (DSA_LATENT * dsa_bytes + DSA_INDEX_ROW), 0) for sh in shares]
    else:
        rows = [kv_row_bytes(sh.spec, opts.kv_k, opts.kv_v) for sh in shares]
    binding = max(range(len(shares)), key=lambda i: sum(rows[i]))
    kb, vb = rows[binding]
    cell = max(1, kb + vb)
    stage = shares[binding].spec
    rest, budget, frac = kv_budget(req, shares)
    swa_tokens = None
    recurrent = [g for g in stage.groups if g.kind.is_recurrent and not g.mtp]
    mamba_slots = None
    per_running = slots_per_request(req.spec.model_type)
    if recurrent and rest > 0:
        # the Mamba state pool takes ratio / (1 + ratio) of what is left; KV gets the rest
        # (model_runner_kv_cache_mixin handle_max_mamba_cache)
        ssm_bytes = req.spec.ssm_pinned_bytes or MAMBA_SSM_BYTES
        per_req = sum(g.count * (g.conv_state_values * req.spec.dtype_bytes
                                 + (g.state_values - g.conv_state_values) * ssm_bytes)
                      for g in recurrent)
        mamba_slots = int(rest * MAMBA_RATIO / (1 + MAMBA_RATIO)) // max(1, per_req)
        # the KV pool gets what the whole slots leave, not the rest of the ratio's share
        rest -= mamba_slots * per_req
        note_hybrid = (f"Mamba state pool: {mamba_slots:,} slots of {per_req / MiB:.1f} MiB; "
                       f"max_running_requests ≤ {mamba_slots // per_running:,} "
                       f"({per_running} slots a request)")
    if sliding:
        # one pool for full layers and one for window layers, sized so the window pool holds
        # swa_full_tokens_ratio as many tokens (model_runner_kv_cache_mixin set_num_tokens_hybrid_swa)
        fk, fv = kv_row_bytes(stage, opts.kv_k, opts.kv_v, (LayerKind.FULL, LayerKind.MLA))
        sk, sv = kv_row_bytes(stage, opts.kv_k, opts.kv_v,
                              (LayerKind.SLIDING, LayerKind.CHUNKED))
        tokens = int(max(0, rest) / ((fk + fv) + SWA_RATIO * (sk + sv))) // page * page
        swa_tokens = int(tokens * SWA_RATIO) // page * page
    else:
        tokens = max(0, rest) // cell // page * page

    slots_ok = mamba_slots is None or mamba_slots // per_running >= req.sequences

    def fits_len(length: int) -> bool:
        return length == 0 or (tokens >= length * req.sequences and slots_ok)

    max_ctx = largest(fits_len, 1 << 31)
    # a request of the context holds its tokens in the pool and, on a hybrid model, 3 slots
    # of the Mamba state pool (5 with the extra buffer)
    max_seqs = tokens // req.context
    if mamba_slots is not None:
        max_seqs = min(max_seqs, mamba_slots // per_running)
    mla = any(g.kind == LayerKind.MLA for g in req.spec.groups)

    def allocated(n: int, k_row: int, v_row: int) -> str:
        # each pool holds its tokens and one more page (memory_pool.py); the MLA pool holds
        # one latent per token and prints one figure
        k_gb, v_gb = (n + page) * k_row / GiB, (n + page) * v_row / GiB
        if mla:
            return f"KV Cache is allocated. #tokens: {n}, KV size: {k_gb + v_gb:.2f} GB"
        return f"KV Cache is allocated. #tokens: {n}, K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB"

    if dsa:
        # the pool (NSATokenToKVPool / DSATokenToKVPool): tokens + page latent rows of
        # calculate_mla_kv_cache_dim (656 bytes for fp8 under FlashMLA, 576 values × 2 for
        # bfloat16) and (tokens + page + 1) // page pages of page × 132 indexer bytes, in
        # every layer; the log's figure sums both
        layers = sum(g.count for g in stage.groups_for(mtp=False) if g.kind is LayerKind.MLA)
        row = FP8_DSA_ROW if dsa_bytes == 1 else DSA_LATENT * dsa_bytes
        pool_bytes = dsa_pool_bytes(tokens, layers, row)
        lines = [f"KV Cache is allocated. #tokens: {tokens}, KV size: {pool_bytes / GiB:.2f} GB"]
    elif swa_tokens is not None:
        # the window layers' pool first, then the full layers' (swa_memory_pool.SWAKVPool)
        used = ((swa_tokens + page) * (sk + sv) + (tokens + page) * (fk + fv)) / GiB
        lines = [f"Use sliding window memory pool. full_layer_tokens={tokens}, "
                 f"swa_layer_tokens={swa_tokens}", allocated(swa_tokens, sk, sv),
                 allocated(tokens, fk, fv),
                 f"SWAKVPool mem usage: {used:.2f} GB, swa size: {swa_tokens}, full size: "
                 f"{tokens}"]
    else:
        lines = [allocated(tokens, kb, vb)]
    if frac is not None:
        lines.insert(0, f"mem_fraction_static={frac}")
    cmd = [f"python -m sglang.launch_server --model-path {model_ref(req.spec)}",
           f"--context-length {req.context}", f"--max-running-requests {req.sequences}"]
    if k_name != "auto":
        cmd.append(f"--kv-cache-dtype {k_name}")
    cmd += parallel_flags(p, "--tp", "--pp", "--dp")
    if s.mem_fraction_static:
        cmd.append(f"--mem-fraction-static {frac}")
    notes = [n for n in (note_hybrid,) if n]
    if dsa:
        if s.page_size and s.page_size != DSA_PAGE:
            notes.append(f"SGLang forces 64-token pages for DeepSeek Sparse Attention; "
                         f"--page-size {s.page_size} is ignored")
        note = (f"DSA pool: {kb:,} bytes a token per rank in the profiler's cell (the latent "
                f"at {dsa_bytes} B a value + 132-byte indexer keys in all {layers} layers)")
        if row != DSA_LATENT * dsa_bytes:
            note += (f"; the pool then allocates {layers * (row + DSA_INDEX_ROW):,} (a "
                     f"{row}-byte fp8 latent row), more than the profile set aside")
        notes.append(note)
        if dsa_flag is None:
            notes.append("--kv-cache-dtype auto: SGLang runs a DSA model in bfloat16 on this "
                         "card (fp8_e4m3 from SM100)")
    offload_tokens = 0
    if s.offload_bytes:
        offload_tokens = s.offload_bytes // cell
        cmd.append(f"--enable-hierarchical-cache --hicache-size {s.offload_bytes / GiB:g}")
        notes.append(f"HiCache host tier holds about {offload_tokens:,} more tokens per rank")
    return EngineReport(
        engine=NAME,
        budget_bytes=budget,
        weights_bytes=max(sh.weights_bytes for sh in shares),
        overheads=(("CUDA context before load", PRELOAD),),
        kv_pool_bytes=max(0, rest),
        kv_tokens=tokens * p.dp,
        blocks=tokens // page,
        block_tokens=page,
        max_concurrency=tokens / max(1, req.context),
        max_sequences=max_seqs,
        max_context=max_ctx,
        fits=tokens >= req.context * req.sequences and slots_ok,
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=tuple(notes),
        binding_stage=binding,
        offload_tokens=offload_tokens,
        extra={"mem_fraction_static": frac, "swa_tokens": swa_tokens, "mamba_slots": mamba_slots, "cell_bytes": cell, "weights": weights.format},
    )
