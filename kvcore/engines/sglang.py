"""SGLang allocation rules.

Sources read (sgl-project/sglang): ``python/sglang/srt/server_args.py``
(``_handle_gpu_memory_settings``: ``mem_fraction_static`` from reserved memory, at least 10 GiB
reserved on cards over 60 GB), ``python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py``
(``profile_max_num_token``: rest = free after weights − free before loading × (1 −
mem_fraction_static); tokens = rest // cell size, rounded down to the page; cell = KV heads per
attention-TP rank × (K + V head dims) × layers × dtype bytes, MLA one latent), and
``mem_cache/memory_pool.py`` (each K and V buffer holds tokens + page_size rows; sizes printed in
GB of 2^30 bytes).
"""

from __future__ import annotations

from ..kv import kv_row_bytes
from ..model import LayerKind
from ..parallel import sglang_stage_layers
from ..plan import largest
from .base import (
    EngineReport,
    EngineRequest,
    GiB,
    MiB,
    model_ref,
    need_gpu,
    parallel_flags,
    rank_weights,
    refuse_architecture,
    refuse_indexer_cache,
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
#: architectures; whether the token pool gives Gemma-3n's KV-shared layers (which read an
#: earlier layer's cache) buffers of their own was not read
LAYOUT_UNKNOWN = {
    "gemma4": "Gemma 4's full-attention pool (global_head_dim, num_global_key_value_heads)",
    "gemma4_text": "Gemma 4's full-attention pool (global_head_dim, num_global_key_value_heads)",
    "step3p7": "whether SGLang gives Step-3.7 a sliding-window pool",
    "gemma3n": "whether SGLang's pool keeps Gemma-3n's KV-shared layers (num_kv_shared_layers)",
    "gemma3n_text": "whether SGLang's pool keeps Gemma-3n's KV-shared layers "
                    "(num_kv_shared_layers)",
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


def slots_per_request(model_type: str) -> int:
    """Mamba state slots SGLang reserves per running request for this model."""
    extra = EXTRA_BUFFER_SLOTS if model_type in EXTRA_BUFFER_TYPES else 0
    return SLOTS_PER_REQUEST + extra


def plan(req: EngineRequest) -> EngineReport:
    refuse_architecture("SGLang", req.spec, UNSUPPORTED)
    # NSATokenToKVPool (mem_cache/memory_pool.py) keeps an fp8 indexer buffer of 132 bytes a
    # token in every layer, shared or not, in 64-token pages; the latent's width under an fp8
    # cache (kv_cache_dim) and the default --kv-cache-dtype for these models were not
    # established from source
    refuse_indexer_cache("SGLang", req.spec,
                         "its NSA pool's fp8 latent width and default KV dtype are not "
                         "established; use --engine vllm or raw")
    # its DeciLMForCausalLM numbers attention by the decoder layer, but whether the token
    # pool then holds the no-op layers too is not established
    refuse_nas_layout("SGLang", req.spec, always="the token pool's layers for no-op blocks "
                      "are not established")
    refuse_layout("SGLang", req.spec, LAYOUT_UNKNOWN, LAYOUT_UNKNOWN_ARCH)
    s, opts = req.settings, req.cache
    k_name = single_format(NAME, opts, FORMATS)
    sliding = (req.spec.model_type in HYBRID_SWA_TYPES
               and any(g.kind in (LayerKind.SLIDING, LayerKind.CHUNKED) for g in req.spec.groups))
    note_hybrid = ""
    p = req.parallel
    page = s.page_size or 1
    # --dtype auto serves a float32 checkpoint in 16 bits (FP16 for FP32 models; Gemma-2 and
    # Gemma-3, which overflow in FP16, in BF16): 2 bytes a weight either way
    weights, shares = rank_weights(req, STAGE_SPLIT, f32_as="bf16")
    # every rank sizes its pool from the free memory of the most loaded rank (a world-group
    # minimum) over its own layers' cell; the pipeline keeps the smallest pool, the stage
    # with the most KV layers (model_runner_kv_cache_mixin profile_max_num_token)
    rows = [kv_row_bytes(sh.spec, opts.kv_k, opts.kv_v) for sh in shares]
    binding = max(range(len(shares)), key=lambda i: sum(rows[i]))
    kb, vb = rows[binding]
    cell = max(1, kb + vb)
    stage = shares[binding].spec
    frac = s.mem_fraction_static
    gpu = shares[0].gpu
    if req.kv_budget_bytes is not None:
        rest = req.kv_budget_bytes
        budget = None
    elif gpu is None:
        raise need_gpu()
    else:
        total = gpu.total_bytes
        if frac is None:
            frac = auto_mem_fraction(total, p.tp, p.pp, s.chunked_prefill_size)
            if req.spec.vision_encoder:
                frac *= vision_factor(*req.spec.vision_encoder)
        before = total - PRELOAD - (int(0.3 * GiB) if p.ranks_per_replica > 1 else 0)
        after = before - max(sh.weights_bytes for sh in shares)
        rest = int(after - before * (1 - frac))
        budget = int(before * frac)
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

    if swa_tokens is not None:
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
