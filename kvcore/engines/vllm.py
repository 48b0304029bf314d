"""vLLM (V1 engine) allocation rules, as of release 0.34.0.

Sources read (vllm-project/vllm, the v0.34.0 release package, ``vllm/_version.py`` commit
g62d4bc3c7; the 0.33.0 package, g4ba787ec9, for what changed): ``vllm/v1/worker/gpu_worker.py``
(reservation = ``gpu_memory_utilization`` × total memory, 1.0 by default with the extensible KV
cache, minus weights, the profiled activation peak and non-torch memory: ``Available KV cache
memory``, printed through ``format_gib``), ``vllm/v1/worker/extensible_kv_cache.py`` (the blocks
committed after warmup: the memory then free, less the transient peak and a margin,
``rank_budget``), ``vllm/v1/kv_cache_interface.py`` (page of a layer = block_size × KV heads ×
(K + V head sizes) × dtype bytes, MLA one latent; a sliding window needs ``cdiv(min(W − 1 +
in-flight tokens, L), block) + 1`` pages, in-flight tokens being ``max_concurrent_batches ×
max_num_batched_tokens`` (``vllm/config/vllm.py``); Mamba two state pages in "align" mode, three
where the layer exports prefill checkpoints), ``vllm/v1/core/kv_cache_planning.py``
(layers grouped by spec; page sizes unified by enlarging block sizes or padding; ``num_blocks =
available // bytes per block``, the minimum over workers; the start-up check against ``available
− one block``), ``vllm/v1/core/kv_cache_utils.py`` (``Maximum concurrency = num_blocks /
Σ_groups cdiv(max_memory_g, page)``; ``GPU KV cache size`` = concurrency × max_model_len, logged
with it on one line), ``vllm/config/model.py`` (``get_num_kv_heads`` = max(1, heads // tp), MLA
1), ``vllm/platforms/interface.py`` (hybrid attention/Mamba models: attention block size raised
to a multiple of the kernel block so an attention page holds a Mamba state page, which is padded
to match), ``vllm/engine/arg_utils.py`` (``get_batch_defaults``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..draft import DRAFT_TOKENS, check_vocab, draft_row_bytes
from ..errors import InputError
from ..formats import KVFormat, Role
from ..gpus import GPU
from ..hf import BAILING_TYPES, GEMMA4_TYPES, MINIMAX_M3_TYPES
from ..model import LayerGroup, LayerKind, ModelSpec
from ..parallel import stage_layers
from ..plan import MAX_SEQUENCES, largest
from ..units import format_bytes
from . import vllm_backends, vllm_skip, vllm_tq
from .base import (
    EngineReport,
    EngineRequest,
    GiB,
    RankShare,
    check_budget,
    fp8_kv_checkpoint,
    has_kind,
    loaded_weights,
    model_ref,
    need_gpu,
    own_draft_format,
    parallel_flags,
    past_derived,
    rank_weights,
    refuse_architecture,
    refuse_layout,
    refuse_nas_layout,
    single_format,
)
from .vllm_lora import for_vllm, lora_label, lora_note, lora_split
from .vllm_offload import offload_extra, offload_note, offload_shares, refuse_compressed

NAME = "vllm"
#: architectures current vLLM refuses to load, by model_type: its model registry
#: (vllm/model_executor/models/registry.py, _PREVIOUSLY_SUPPORTED_MODELS) names the last
#: release that ran each. Mllama went with the V0 encoder-decoder path (last in 0.10.2); the
#: MiniMax lightning-attention models were removed by PR #45993 (last in 0.23.0).
UNSUPPORTED = {
    "mllama": ("MllamaForConditionalGeneration",
               "removed after vLLM 0.10.2; SGLang runs it, or pin vllm==0.10.2"),
    "mllama_text_model": ("MllamaForConditionalGeneration",
                          "removed after vLLM 0.10.2; SGLang runs it, or pin vllm==0.10.2"),
    "minimax_m1": ("MiniMaxM1ForCausalLM",
                   "removed after vLLM 0.23.0; llama.cpp runs it, or pin vllm==0.23.0"),
    "minimax_text_01": ("MiniMaxText01ForCausalLM",
                        "removed after vLLM 0.23.0; llama.cpp runs it, or pin vllm==0.23.0"),
    "minimax": ("MiniMaxForCausalLM",
                "removed after vLLM 0.23.0; llama.cpp runs it, or pin vllm==0.23.0"),
    # no RWKV model in its registry (vllm/model_executor/models/registry.py)
    "rwkv7": ("RWKV7ForCausalLM", "vLLM has no RWKV model; llama.cpp runs it"),
    # "OuroForCausalLM": "0.26.0": models/ouro.py kept a cache for each of a layer's
    # total_ut_steps runs; the Transformers backend gives each layer one attention cache,
    # which its loop would share
    "ouro": ("OuroForCausalLM",
             "removed after vLLM 0.26.0 (its model kept a cache for each of a layer's runs); "
             "pin vllm==0.26.0, or plan it with --engine raw"),
}
#: architectures whose own implementation vLLM removed, with the last release that had it
#: (0.34.0 model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS; the ones kvplan can
#: read). ModelRegistry falls back to its Transformers backend first (_try_resolve_transformers:
#: where transformers' class, or the checkpoint's remote code, is backend-compatible), so most
#: may still start, with the same per-layer cache; the plan says so
PREVIOUSLY_SUPPORTED = {
    "XverseForCausalLM": "0.23.0", "Dots1ForCausalLM": "0.23.0", "BambaForCausalLM": "0.23.0",
    "BaiChuanForCausalLM": "0.23.0", "BaichuanForCausalLM": "0.23.0",
    "InternLMForCausalLM": "0.23.0", "QWenLMHeadModel": "0.23.0", "JAISLMHeadModel": "0.22.0",
    "AquilaModel": "0.24.0", "AquilaForCausalLM": "0.24.0", "Grok1ModelForCausalLM": "0.24.0",
    "Grok1ForCausalLM": "0.24.0", "AyaVisionForConditionalGeneration": "0.24.0",
    "TeleChatForCausalLM": "0.25.0", "PersimmonForCausalLM": "0.25.0",
    "FuyuForCausalLM": "0.25.0", "Plamo2ForCausalLM": "0.26.0", "ArcticForCausalLM": "0.28.0",
    "ChameleonForConditionalGeneration": "0.28.0", "MPTForCausalLM": "0.28.0",
    "MptForCausalLM": "0.28.0", "RWForCausalLM": "0.28.0", "StableLMEpochForCausalLM": "0.28.0",
    "KeyeForConditionalGeneration": "0.33.0", "KeyeVL1_5ForConditionalGeneration": "0.33.0",
    "Phi3SmallForCausalLM": "0.9.2", "Phi4FlashForCausalLM": "0.10.2",
    "MotifForCausalLM": "0.10.2",
}
#: the release whose rules this module follows
RELEASE = "0.34.0"
#: the block vLLM picks without --block-size where every backend takes it
#: (CacheConfig.DEFAULT_BLOCK_SIZE, 64 from 0.34.0)
DEFAULT_BLOCK = vllm_backends.DEFAULT_BLOCK
#: the kernel block every CUDA backend's sizes are multiples of (FlashAttention, Triton and
#: the MLA backends take multiples of 16 only): the smallest block, and the step a
#: --block-size must keep
KERNEL_STEP = 16
MAX_BATCHED_TOKENS = 8192
#: `vllm serve`'s max_num_batched_tokens on cards of 160 GiB or more (B200, B300, MI300X)
LARGE_CARD_BATCHED_TOKENS = 16384
#: `vllm serve`'s max_num_batched_tokens on cards under 70 GiB, on A100s and on GB10
#: (engine/arg_utils.py get_batch_defaults: OPENAI_API_SERVER)
SMALL_CARD_BATCHED_TOKENS = 2048


def default_block(spec: ModelSpec, gpu: GPU | None, kv: KVFormat) -> int:
    """The block size vLLM settles on when --block-size is not given.

    The attention backend chooses it (platforms/interface.py update_block_size_for_backend:
    the backend's get_preferred_block_size(64), 64 where its kernels take it, else its
    smallest kernel size); vllm_backends.select models the selection. An MLA model gets the
    first MLA backend that accepts the card, latent and KV dtype: on Hopper FLASH_ATTN_MLA
    (multiples of 16) for a 16-bit cache, FLASHMLA (64 only) for fp8; on SM10x FLASHINFER_MLA
    (32 or 64) where qk_nope_head_dim is 64, 128 or 192, else CUTLASS_MLA (128 only);
    elsewhere TRITON_MLA (multiples of 16): 64 but for CUTLASS_MLA. Hybrid models start from
    64 and keep the block their state pages ask for (_specs), other models 64."""
    if any(g.kind.is_recurrent for g in spec.groups):
        return DEFAULT_BLOCK
    return vllm_backends.default_block(spec, gpu, kv)


def batch_tier(gpu: GPU | None) -> int:
    """`vllm serve`'s max_num_batched_tokens before any cap (0.34.0 engine/arg_utils.py
    EngineArgs.get_batch_defaults, OPENAI_API_SERVER): 16,384 on cards of 160 GiB or more,
    8,192 from 70 GiB but on A100s and GB10 (DGX Spark, compute capability 12.1), else 2,048;
    8,192 where no card is named (a KV budget alone)."""
    if gpu is None:
        return MAX_BATCHED_TOKENS
    if gpu.total_bytes >= 160 * GiB:
        return LARGE_CARD_BATCHED_TOKENS
    if (gpu.total_bytes >= 70 * GiB and "a100" not in gpu.name.lower()
            and gpu.compute_capability != "12.1"):
        return MAX_BATCHED_TOKENS
    return SMALL_CARD_BATCHED_TOKENS


#: the largest multimodal item of Gemma 4 in tokens, a video of 32 frames of 70 soft tokens with
#: their boi, eoi and about 6 timestamp tokens (model_executor/models/gemma4_mm.py
#: get_mm_max_tokens_per_item, _VIDEO_MAX_FRAMES, _VIDEO_MAX_SOFT_TOKENS): one item must fit
#: in a batch of its image-prefix attention
GEMMA4_VIDEO_TOKENS = 32 * (70 + 2 + 6)


def default_batched_tokens(gpu: GPU | None, sequences: int, max_len: int,
                           mm_floor: int = 0) -> int:
    """`vllm serve`'s default max_num_batched_tokens: the card's tier (batch_tier), raised to
    ``mm_floor`` for a multimodal prefix-LM model whose largest item needs more (Gemma 4's
    video: "Raising max_num_batched_tokens from 2048 to 2496"), at most max_num_seqs ×
    max_model_len (engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args,
    _get_min_mm_batched_tokens; chunked prefill is on, so max_model_len does not raise it)."""
    return min(sequences * max(1, max_len), max(batch_tier(gpu), mm_floor))


def in_flight_tokens(mbt: int, pp: int) -> int:
    """Tokens scheduled but not yet settled (config/vllm.py VllmConfig.max_in_flight_tokens):
    max_concurrent_batches × max_num_batched_tokens, with pp + 1 batches in flight under
    async scheduling (on by default; 0.34.0 removed the V1 model runner, so it holds for every
    model). Sliding-window and chunked-local layers keep this many tokens beyond their window
    per request."""
    return (pp + 1) * mbt


def format_gib(n: int) -> str:
    """vllm/utils/mem_utils.py format_gib: str(round(bytes / GiB, 2)) ("4.5", "-2.14")."""
    return str(round(n / GiB, 2))


def capacity_line(tokens: int, max_len: int, conc: float) -> str:
    """kv_cache_utils.update_kv_cache_capacity's one line (printed only once the start-up
    check has passed)."""
    return (f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {max_len:,} "
            f"tokens per request: {conc:.2f}x")


def memory_hint(util: float | None, extensible: bool, after_warmup: bool = False) -> str:
    """kv_cache_planning._more_kv_cache_memory_hint: how the user can make room for the cache,
    as the start-up errors end (after warmup: sized with the graphs in)."""
    if not extensible:
        return ("Try increasing `gpu_memory_utilization` when initializing the engine (this "
                "flag also controls CPU memory reservation on the CPU backend, despite its "
                "name).")
    used_by = ("the model, its activations, CUDA graphs and warmup" if after_warmup
               else "the model and its activations")
    graphs = (" CUDA graphs take less with fewer or smaller capture sizes in the compilation "
              "config." if after_warmup else "")
    if util is not None and util < 1.0:
        return (f"The KV cache gets what is left after {used_by} within "
                f"`gpu_memory_utilization`={util}; increase it (with the extensible KV cache "
                f"it defaults to 1.0) or decrease `max_model_len` or `max_num_seqs`.{graphs}")
    return ("The extensible KV cache already takes all device memory left after "
            f"{used_by}; decrease `max_model_len` or `max_num_seqs`, or the model needs a "
            f"device with more memory.{graphs}")


def _check_lines(check: int, needed: Callable[[int], int], max_len: int,
                 hint: str) -> list[str]:
    """_check_enough_kv_cache_memory against ``check`` bytes: its ValueError, or nothing.
    "To serve at least one request" is quoted up to its estimate (the advice after it is
    the hint's)."""
    if check <= 0:
        return [f"ValueError: No available memory for the cache blocks. {hint}"]
    if needed(max_len) <= check:
        return []
    est = largest(lambda n: n == 0 or needed(n) <= check, max_len)
    estimate = (f" Based on the available memory, the estimated maximum model length "
                f"is {est}." if est else "")
    return [f"ValueError: To serve at least one request with the model's max seq len "
            f"({max_len}), ({format_gib(needed(max_len))} GiB KV cache is needed, which is "
            f"larger than the available KV cache memory ({format_gib(check)} GiB).{estimate}"]


def physical_bytes(blocks: int, strides: Sequence[int]) -> int:
    """ExtensibleKVCache.physical_bytes_for: the bytes a commit of ``blocks`` maps, each
    segment (``strides``: its bytes a block) rounded up to whole granules."""
    return sum(-(-blocks * st // GRANULE) * GRANULE for st in strides)


def startup_lines(available: int, per_block: int, needed: Callable[[int], int], max_len: int,
                  tokens: int, conc: float, final_blocks: int | None = None,
                  util: float | None = None, strides: Sequence[int] = ()) -> list[str]:
    """What vLLM 0.34.0 prints from profiling to the capacity line: ``Available KV cache
    memory``, then either a start-up check's ValueError or the one capacity line.

    The first check (kv_cache_planning.get_kv_cache_configs, _check_enough_kv_cache_memory)
    plans against ``available − one block`` (the null block the pool holds back): nothing
    left → "No available memory"; a request of max_model_len needing more (``needed(L)``
    bytes) → "To serve at least one request", with the binary-searched length that fits,
    left out when not even one token does. With the extensible KV cache (``final_blocks``:
    the blocks sized after warmup) shrink_kv_cache_configs checks again against
    ``(final_blocks − 1)`` blocks; update_kv_cache_capacity prints the capacity line only
    after both pass (the "Memory after warmup" line between them carries free and committed
    bytes of the running process, which kvplan does not reproduce); the workers then commit
    the final blocks (extensible_kv_cache.py extend_kv_cache: "Extended KV cache to N blocks
    (X GiB).", X the segments ``strides`` mapped in whole granules)."""
    lines = [f"Available KV cache memory: {format_gib(available)} GiB"]
    extensible = final_blocks is not None
    failed = _check_lines(available - per_block, needed, max_len,
                          memory_hint(util, extensible))
    if not failed and final_blocks is not None:
        failed = _check_lines((final_blocks - 1) * per_block, needed, max_len,
                              memory_hint(util, extensible, after_warmup=True))
    if failed:
        return lines + failed
    lines.append(capacity_line(tokens, max_len, conc))
    if final_blocks is not None and strides:
        lines.append(f"Extended KV cache to {final_blocks} blocks "
                     f"({physical_bytes(final_blocks, strides) / GiB:.2f} GiB).")
    return lines


#: memory outside torch that a rank gains after vLLM's start-up snapshot (kernel modules,
#: library workspaces): ~0.35 GiB seen as "non_torch_memory" on one card
NON_TORCH = int(0.35 * GiB)
#: extra non-torch memory per rank when NCCL is up (tp or pp > 1)
NCCL = int(0.25 * GiB)
#: what a process holds on the card when vLLM takes its start-up snapshot
#: (gpu_worker.py init_device: the CUDA context, then cuBLAS's and cuBLASLt's handles from one
#: matmul and one linear, created before the snapshot "so they count as baseline"): measured
#: with torch 2.11 on an H100 and an H200, to the byte alike (bench/results/context-h100.jsonl,
#: context-h200.jsonl: 526.8 MiB of context and 192 MiB of cuBLAS). 0.34's extensible KV cache
#: is sized from the free memory, so this comes off the cache; under 0.33's utilization budget
#: it did not
BEFORE_SNAPSHOT = 753_729_536
#: the extensible KV cache's sizing margin (v1/worker/extensible_kv_cache.py
#: KV_CACHE_MARGIN_FLOOR_BYTES on CUDA, KV_CACHE_MARGIN_FRACTION of the transient peak)
MARGIN_FLOOR = 1 << 30
MARGIN_FRACTION = 0.75
#: the commit granule of its driver-mapped segments (utils/extensible_tensor.py granule_size:
#: the driver's granularity, at least 2 MiB, which it is on CUDA cards)
GRANULE = 2 << 20


@dataclass(frozen=True)
class Budget:
    """One rank's KV memory under vLLM 0.34 (v1/worker/gpu_worker.py, v1/worker/
    extensible_kv_cache.py), or the pinned --kv-cache-memory that turns sizing off."""

    #: ``Available KV cache memory``: requested − weights − activation peak − non-torch (the
    #: reservation the cache's address range is sized for; no CUDA-graph estimate with the
    #: extensible cache, whose sizing measures the graphs)
    reserved: int
    #: what measure_kv_cache_bytes gives the cache after warmup: min(requested − used,
    #: headroom − margin) − activation peak, headroom being the card less what the process
    #: held at its snapshot and what it uses since; None where --kv-cache-memory pins it
    measured: int | None = None
    #: ceil(total × utilization): the whole card unless --gpu-memory-utilization caps it
    requested: int | None = None
    #: the headroom (free memory after warmup, less the margin) bound the cache, not the
    #: requested budget: the snapshot's baseline and the margin then count as overheads
    headroom_binds: bool = False
    margin: int = 0
    #: free memory an explicit utilization keeps out of the cache: what the whole card would
    #: give less what the utilization gives (measure_kv_cache_blocks warns from 1 GiB)
    withheld: int = 0

    @property
    def kv_bytes(self) -> int:
        """The bytes the cache's committed blocks may take."""
        return self.reserved if self.measured is None else self.measured

    def overheads(self, act: int, non_torch: int,
                  startup: str = "CUDA context and cuBLAS") -> tuple[tuple[str, int], ...]:
        """The report's reservations besides weights and cache: the activation peak and
        non-torch memory, with the snapshot's baseline (named by `startup`) and the margin
        where the headroom bound the cache."""
        used = (("activation peak", act), ("non-torch (kernels, NCCL)", non_torch))
        if not self.headroom_binds:
            return used
        return ((f"{startup} at vLLM's snapshot", BEFORE_SNAPSHOT), *used,
                ("extensible KV cache margin", self.margin))


#: gpu_memory_utilization's default without the extensible KV cache
#: (CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION; the default of every release from 0.20 to 0.33)
ESTIMATE_UTILIZATION = 0.92


def rank_budget(total: int | None, util: float | None, used: int, act: int,
                pinned: int | None, extensible: bool = True,
                usable: int | None = None) -> Budget:
    """vLLM 0.34's KV bytes on one rank of ``total`` bytes holding ``used`` bytes outside the
    cache (weights, non-torch memory, LoRA slots) and an activation peak ``act``.

    ``util`` None is the default: the extensible KV cache (on for CUDA unless
    --kv-cache-memory is given) resolves gpu_memory_utilization to 1.0 and sizes the cache
    from the memory free after warmup and CUDA-graph capture, keeping the transient peak and a
    margin of max(1 GiB, 0.75 × that peak) free. An explicit utilization caps the budget at
    that share of the card. Without the extensible cache (``extensible`` False) the budget is
    the utilization's share (0.92 by default) less what is used and the peak, as before 0.34
    (its CUDA-graph estimate aside, as kvplan has no figure for it). ``usable``: the memory
    the process may take where less than ``total`` (a unified memory's GPU share, or what the
    user gave as free there: gpu_limit), which bounds what the extensible cache finds free."""
    if pinned is not None:
        return Budget(reserved=pinned)
    assert total is not None
    if not extensible:
        requested = math.ceil(total * (ESTIMATE_UTILIZATION if util is None else util))
        return Budget(reserved=requested - used - act, requested=requested)
    requested = math.ceil(total * (1.0 if util is None else util))
    margin = max(MARGIN_FLOOR, int(act * MARGIN_FRACTION))
    headroom = min(total, usable or total) - BEFORE_SNAPSHOT - used - margin
    within = requested - used
    return Budget(reserved=within - act, measured=min(within, headroom) - act,
                  requested=requested, headroom_binds=headroom < within, margin=margin,
                  withheld=max(0, headroom - within))


def blocks_within(num_bytes: int, per_block: int, strides: list[int]) -> int:
    """ExtensibleKVCache.blocks_within: the most blocks whose segments, each rounded up to
    whole granules, fit in ``num_bytes`` (one segment per layer region of ``strides`` bytes a
    block)."""
    hi = max(0, num_bytes // per_block)
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if physical_bytes(mid, strides) <= num_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


#: state pages a request of a hybrid model holds per Mamba/GDN group: V1 turns prefix
#: caching on, and MambaModelConfig.verify_and_update_config (model_executor/models/
#: config.py) then sets mamba_cache_mode "align" for every hybrid model (0.34.0's
#: MambaCacheMode has only "align" and "none"); kv_cache_interface.py
#: MambaSpec.max_memory_usage_bytes: 2 + speculative + prefill-checkpoint pages
MAMBA_PAGES = 2
#: model types whose linear-attention layers are Qwen's Gated DeltaNet
#: (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py)
QWEN_GDN_TYPES = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe",
                            "qwen3_5_moe_text"})
#: FlashInfer's GDN prefill exports a mid-prefill state every 64 tokens
#: (v1/attention/backends/gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
GDN_CHECKPOINT_ALIGN = 64
#: model types whose Mamba layers are vLLM's MambaMixer2 (model_executor/layers/mamba/
#: mamba_mixer2.py, built by nemotron_h.py, falcon_h1.py, granitemoehybrid.py, mamba2.py and
#: zamba2.py): MambaMixer2.get_kv_cache_spec always exports a prefill checkpoint
#: (num_prefill_checkpoint_blocks 1, alignment 1), a third state page a request in "align"
#: mode; Mamba1's MambaMixer (Jamba, Mamba, Falcon-Mamba) exports none
MAMBA2_TYPES = frozenset({"nemotron_h", "falcon_h1", "granitemoehybrid", "mamba2", "zamba2"})
#: model types whose SSM state vLLM keeps in float32 unless the config names
#: mamba_ssm_cache_dtype (NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype,
#: model_executor/models/config.py: "only float32 is known to have no accuracy issues")
FP32_SSM_TYPES = frozenset({"nemotron_h"})
FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8_e5m2",
           "fp8_pth": "fp8_per_token_head", "int8_pth": "int8_per_token_head",
           "int4_pth": "int4_per_token_head", "nvfp4": "nvfp4",
           "nvfp4_4over6": "nvfp4_4over6", **vllm_tq.PACKED}
#: MiniMax-M3's sparse attention and its indexer take 128-token blocks only, one sparse block
#: a page (models/minimax_m3/common/sparse_attention.py and indexer.py
#: get_supported_kernel_block_sizes); its dense layers' backends take multiples of 16
MINIMAX_BLOCK = 128
#: the formats MiniMax-M3's main cache is sized in here (the sparse impl runs bf16, fp8_e4m3
#: and fp8_e5m2 on Triton or MSA; nvfp4 is MSA's packed layout)
MINIMAX_FORMATS = frozenset({"auto", "fp8", "fp8_e5m2"})
#: DeepSeek Sparse Attention (a config with index_topk): every kernel it runs takes blocks in
#: multiples of 64 (0.33.0 and 0.34.0: mla/indexer.py DeepseekV32IndexerBackend [64],
#: mla/flashmla_sparse.py and mla/flashattn_mla_sparse.py MultipleOf(64)), so 64 is the
#: backends' preferred size and --block-size must be a multiple of it
DSA_BLOCK = 64
#: the kv-cache dtypes the sparse MLA backend takes (mla/flashmla_sparse.py
#: FlashMLASparseBackend.supported_kv_cache_dtypes: auto, bfloat16, fp8 = fp8_ds_mla; its
#: nvfp4_ds_mla is Blackwell-only and not modeled here)
DSA_FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8"}
#: bytes of one token's fp8_ds_mla latent (mla/flashmla_sparse.py; kv_cache_interface.py
#: MLAAttentionSpec.real_page_size_bytes): 512 fp8 NoPE values, 4 fp32 scales (one per 128),
#: 64 bf16 RoPE values
FP8_DS_MLA_BYTES = 512 + 4 * 4 + 64 * 2
#: the latent width the sparse MLA kernels take (get_supported_head_sizes: 512 + 64)
DSA_LATENT = 576
#: the indexer's key cache quantizes blocks of 128 values to fp8 with one fp32 scale each
#: (models/deepseek_v2.py Indexer: quant_block_size 128, a uint8 cache of
#: head_dim + head_dim // 128 × 4 bytes per token), whatever --kv-cache-dtype is
INDEXER_QUANT_BLOCK = 128


def indexer_row_bytes(width: int) -> int:
    """Bytes vLLM's DSA indexer cache keeps per token and layer for a key of ``width``."""
    return width + width // INDEXER_QUANT_BLOCK * 4


def check_dsa(spec: ModelSpec, gpu: GPU | None, kv: KVFormat) -> str:
    """vLLM's --kv-cache-dtype for a DeepSeek Sparse Attention model, or a one-line refusal
    of what its sparse MLA backends cannot run (or kvplan cannot size exactly)."""
    width = next(g.head_dim_k for g in spec.groups if g.kind is LayerKind.MLA)
    if width != DSA_LATENT:
        raise InputError(f"vLLM's sparse MLA kernels take a {DSA_LATENT}-value latent; this "
                         f"model's is {width}", field="engine")
    name = DSA_FORMATS.get(kv.name)
    if name is None:
        raise InputError(f"vLLM runs DeepSeek Sparse Attention with --kv-cache-dtype auto, "
                         f"bfloat16 or fp8 (fp8_ds_mla), not {kv.name}", field="kv_k")
    if gpu is not None and gpu.cuda_family not in (9, 10):
        raise InputError(f"vLLM's sparse MLA backends for DeepSeek Sparse Attention run on "
                         f"Hopper (sm90) and Blackwell (sm100) cards, not on {gpu.name}",
                         field="gpu")
    if name == "fp8" and (gpu is None or gpu.cuda_family != 9):
        # Hopper has one sparse backend, FLASHMLA_SPARSE (fp8_ds_mla, 656 bytes a token);
        # on SM10x an fp8 cache puts FLASHINFER_MLA_SPARSE first (platforms/cuda.py
        # _get_backend_priorities), which refuses fp8_ds_mla and keeps a layout not sized here
        raise InputError("vLLM's fp8 cache for DeepSeek Sparse Attention is sized here on "
                         "Hopper (FLASHMLA_SPARSE, fp8_ds_mla) only; give a Hopper --gpu or a "
                         "16-bit cache", field="kv_k")
    return name


#: Gemma 4 with a per-token-head scaled cache: a 512-wide global head of K and V (2 × 512 + 2 × 4
#: scale bytes = 1032) is padded to twice a 256-wide local one (2 × 260 = 520), so pages of the
#: two kinds divide (gemma4.py Gemma4Attention kv_cache_page_size_padded)
GEMMA4_PTH_HEAD = {512: 1040}


def check_minimax(req: EngineRequest, k_name: str) -> None:
    """Refuse, in one line, what of MiniMax-M3 under vLLM is not sized: index values (the
    model never builds index_v_proj), a block other than 128 tokens, an nvfp4 cache (MSA's
    packed pages), ROCm's model (its own cache layout) and the MTP draft."""
    spec, s = req.spec, req.settings
    if any(g.head_dim_v for g in spec.groups if g.kind is LayerKind.INDEX):
        raise InputError("vLLM's MiniMax-M3 builds index keys only (sparse_disable_index_value "
                         "set for every sparse layer); this config keeps index values in some",
                         field="engine")
    if s.block_size and s.block_size != MINIMAX_BLOCK:
        raise InputError(f"vLLM's MiniMax-M3 sparse attention and indexer take "
                         f"{MINIMAX_BLOCK}-token blocks only; got --block-size {s.block_size}",
                         field="block_size")
    if k_name not in MINIMAX_FORMATS:
        raise InputError(f"vLLM's MiniMax-M3 cache is sized here in bf16, fp8_e4m3 or "
                         f"fp8_e5m2, not {req.cache.kv_k.name}", field="kv_k")
    if any(g is not None and g.vendor != "nvidia" for g in req.gpus):
        raise InputError("vLLM runs MiniMax-M3 on ROCm with its own model and cache layout "
                         "(models/minimax_m3/amd), which kvplan does not size", field="gpu")
    if req.cache.mtp or s.speculative_tokens:
        raise InputError("vLLM's MiniMax-M3 MTP draft (models/minimax_m3 mtp.py) is not sized: "
                         "whether its layer keeps index keys was not established",
                         field="mtp")


def _value_bytes(fmt: KVFormat, width: int, role: Role = "k") -> int:
    """Bytes vLLM stores for one token's row of ``width`` values in ``fmt`` (K or V)."""
    if fmt.name in vllm_backends.NVFP4:
        # e2m1 pairs + one fp8 scale per 16 values
        return width // 2 + width // 16
    return fmt.row_bytes(width, role)


@dataclass(frozen=True)
class Spec:
    """One vLLM KV-cache spec: a kind, its page, and how many pages a request needs."""

    kind: LayerKind
    layers: int
    block: int
    page: int
    window: int | None = None
    state: bool = False
    #: state pages a request keeps beyond the two of "align" mode: the prefill checkpoint
    #: FlashInfer's GDN prefill, FlashKDA's and every MambaMixer2 export
    #: (MambaSpec.num_prefill_checkpoint_blocks)
    checkpoint_pages: int = 0
    #: mamba_cache_mode "align" (prefix caching on, V1's default); False: "none"
    align: bool = True
    #: a sliding window's extra trailing tokens: a draft of several MTP modules reads that
    #: many (speculative tokens − 1) past the computed range mid-prefill
    #: (kv_cache_planning.get_global_kv_cache_groups, SlidingWindowSpec.extra_retained_tokens)
    retained: int = 0
    #: layers kept at the model's dtype beside a quantized cache (their own spec: a group of
    #: their own unless every layer is full attention)
    skipped: bool = False

    def pages_for(self, max_len: int, in_flight: int, encoder_tokens: int,
                  spec_tokens: int = 0) -> int:
        """Pages one request of ``max_len`` tokens needs (the spec's max_memory_usage_bytes
        over its page), ``in_flight`` tokens scheduled but not settled."""
        if self.state:
            # mamba_cache_mode "align": two state pages, one per speculative token, and the
            # prefill checkpoint where one is exported; "none" (prefix caching off): the
            # running state and one per speculative token
            if not self.align:
                return 1 + spec_tokens
            return MAMBA_PAGES + spec_tokens + self.checkpoint_pages
        if self.kind is LayerKind.SLIDING:
            assert self.window is not None
            return -(-min(self.window - 1 + self.retained + in_flight, max_len)
                     // self.block) + 1
        if self.kind is LayerKind.CHUNKED:
            assert self.window is not None
            return -(-min(self.window + in_flight, max_len) // self.block)
        if self.kind is LayerKind.CROSS:
            return -(-encoder_tokens // self.block)
        return -(-max_len // self.block)


def gdn_checkpoints(spec: ModelSpec, gpu: GPU | None) -> bool:
    """Whether vLLM 0.34.0 runs Qwen's Gated DeltaNet prefill on FlashInfer, whose
    mid-prefill states become align-mode checkpoints (qwen_gdn_linear_attn.py
    _resolve_gdn_prefill_backend: CUDA sm90, or sm10x / sm12x with linear_key_head_dim 128 on
    a CUDA 13 runtime, the one the release's wheels are built for). Not assumed where no
    card is named."""
    if not spec.gdn_key_head_dim or gpu is None:
        return False
    family = gpu.cuda_family
    return gpu.compute_capability == "9.0" or (family in (10, 12)
                                                and spec.gdn_key_head_dim == 128)


def flashkda_checkpoints(spec: ModelSpec, gpu: GPU | None) -> bool:
    """Whether Kimi-K3's KDA layers run their prefill on FlashKDA, whose mid-prefill states
    become align-mode checkpoints (models/kimi_k3/nvidia/kda.py resolve_kda_prefill_backend
    "auto" and is_flashkda_supported: CUDA major 9, 10 or 12 with the checkpoint's 128-wide
    heads, bf16 activations and bounded gate; kda_checkpoint.py: alignment 16, one checkpoint
    page). Kimi-Linear's KDA (kimi_gdn_linear_attn.py) exports none. Not assumed where no
    card is named."""
    return (spec.architecture.startswith("KimiK3") and gpu is not None
            and gpu.cuda_family in (9, 10, 12))


def _checkpoint_pages(spec: ModelSpec, kind: LayerKind, gdn: bool, kda: bool) -> int:
    """Prefill-checkpoint state pages a request keeps per recurrent group in "align" mode."""
    if kind is LayerKind.MAMBA:
        return int(spec.model_type in MAMBA2_TYPES)
    return int(kind is LayerKind.LINEAR and (gdn or kda))


def _specs(spec: ModelSpec, k: KVFormat, v: KVFormat, block: int, mtp: bool,
           spec_tokens: int = 0, gpu: GPU | None = None,
           prefix_caching: bool = True, skipped: frozenset[int] = frozenset(),
           padded: bool = False, draft: KVFormat | None = None) -> list[Spec]:
    """One rank's specs. ``skipped``: the layers kept at the model's dtype (TurboQuant's
    boundary layers, --kv-cache-dtype-skip-layers: vllm_skip); ``padded``: whether vLLM pads
    the sliding-window pages to the shared page (skip_page_size_padded); ``draft``: a draft
    model's own KV dtype (speculative_config kv_cache_dtype) for its layers."""
    attn: list[tuple[LayerGroup, int]] = []
    #: the skipped groups (their own specs, at the model's dtype)
    kept: set[int] = set()
    states: list[tuple[LayerGroup, int]] = []
    ssm_bytes = spec.ssm_dtype_bytes
    if spec.model_type in FP32_SSM_TYPES:
        # the config's mamba_ssm_cache_dtype where it names one, else float32
        ssm_bytes = spec.ssm_cache_dtype_bytes or 4
    dsa = has_kind(spec, LayerKind.INDEXER)
    # prefill checkpoints are "align" mode's, which prefix caching turns on
    checkpoints = prefix_caching and gdn_checkpoints(spec, gpu)
    kda = prefix_caching and flashkda_checkpoints(spec, gpu)
    for g in spec.groups_for(mtp=mtp):
        if g.kind is LayerKind.INDEXER:
            attn.append((g, indexer_row_bytes(g.head_dim_k)))
        elif g.kind is LayerKind.INDEX:
            # MiniMax-M3's index keys: an MLAAttentionSpec of one head in bfloat16, whatever
            # the main cache's dtype (MiniMaxM3IndexerCache, indexer_kv_dtype auto → bf16)
            attn.append((g, g.n_kv_heads * g.head_dim_k * 2))
        elif dsa and g.kind is LayerKind.MLA and k.name == "fp8_e4m3":
            attn.append((g, FP8_DS_MLA_BYTES))
        elif g.kind.is_recurrent:
            # conv state in the model dtype, SSM/delta state in mamba_ssm_dtype
            conv = g.conv_state_values * spec.dtype_bytes
            states.append((g, conv + (g.state_values - g.conv_state_values) * ssm_bytes))
        else:
            own = skipped.intersection(g.layers)
            if own and g.kind in (LayerKind.FULL, LayerKind.SLIDING):
                # a skipped layer's spec at the model's dtype: its own page (in one group with
                # the quantized layers where all are full attention: UniformTypeKVCacheSpecs)
                kept.add(len(attn))
                attn.append((replace(g, layers=tuple(sorted(own))),
                             g.n_kv_heads * (g.head_dim_k + g.head_dim_v) * 2))
                g = replace(g, layers=tuple(i for i in g.layers if i not in own))
                if not g.layers:
                    continue
            gk, gv = (draft, draft) if draft is not None and g.mtp and spec.draft else (k, v)
            per_head = _value_bytes(gk, g.head_dim_k) + (_value_bytes(gv, g.head_dim_v, "v")
                                                          if g.head_dim_v else 0)
            if (spec.model_type in GEMMA4_TYPES and k.name == "fp8_pth"
                    and g.head_dim_k in GEMMA4_PTH_HEAD):
                per_head = GEMMA4_PTH_HEAD[g.head_dim_k]
            attn.append((g, g.n_kv_heads * per_head))
    if states and attn:
        # attention pages must hold a state page: the block size becomes the smallest multiple
        # of the alignment whose page holds the state (platforms/interface.py
        # Platform._align_hybrid_block_size). The alignment is the larger of the kernel's
        # smallest block (16) and the block size (64 unless --block-size says otherwise), at
        # least 128 for an MLA model (the TRTLLM/FlashInfer MLA kernels' 128-token rule), and
        # in "align" mode also a multiple of the Mamba layers' prefill-checkpoint alignment
        # (64 for FlashInfer's GDN)
        biggest_state = max(b for _, b in states)
        per_token = max(b for _, b in attn)
        align = max(KERNEL_STEP, block)
        if any(g.kind is LayerKind.MLA for g, _ in attn):
            align = max(align, 128)
        if checkpoints:
            align = math.lcm(align, GDN_CHECKPOINT_ALIGN)
        block = max(block, align * -(-biggest_state // (align * per_token)))
    # config/speculative.py use_multi_module_mtp: an MTP draft of two modules or more, run for
    # two tokens or more, makes num_prefill_lookahead_tokens the speculative tokens
    retained = (spec_tokens - 1 if mtp and spec.draft is None and spec.mtp_layers >= 2
                and spec_tokens >= 2 else 0)
    out = [Spec(g.kind, g.count, block, block * b, g.window,
                retained=retained if g.kind is LayerKind.SLIDING else 0, skipped=i in kept)
           for i, (g, b) in enumerate(attn)]
    if padded:
        # every sliding-window page padded to the shared page: a block of the quantized dtype
        # priced a byte a value (attention.py get_kv_cache_spec, vllm_skip)
        tq = k.name in vllm_tq.PACKED
        for i, s in enumerate(out):
            if s.kind is LayerKind.SLIDING:
                g, b = attn[i]
                shared = block * g.n_kv_heads * (g.head_dim_k + g.head_dim_v)
                blocks = vllm_tq.KERNEL_BLOCKS if tq and not s.skipped else None
                out[i] = replace(s, block=vllm_skip.sliding_block(b, shared, blocks),
                                 page=shared)
    page = max((s.page for s in out), default=max((b for _, b in states), default=0))
    out += [Spec(g.kind, g.count, block, page, state=True,
                 checkpoint_pages=(_checkpoint_pages(spec, g.kind, checkpoints, kda)
                                   if prefix_caching else 0),
                 align=prefix_caching)
            for g, _ in states]
    uniform_type = len({(_uniform_kind(s.kind), s.window) for s in out}) == 1
    if len({s.page for s in out}) > 1 and not states and not uniform_type:
        # different page sizes (heads differ per group): kv_cache_planning.
        # unify_kv_cache_spec_page_size enlarges a smaller page's block size where the
        # largest page is a whole multiple of it, and pads the page otherwise (its block
        # size unchanged; MLA pages cannot be padded)
        top = max(s.page for s in out)
        unified = []
        for s in out:
            if top % s.page == 0:
                unified.append(replace(s, block=s.block * (top // s.page), page=top))
            elif s.kind is LayerKind.MLA:
                raise InputError("vLLM cannot unify this model's MLA page with its other "
                                 f"pages ({s.page:,} and {top:,} bytes a block)",
                                 field="engine")
            else:
                unified.append(replace(s, page=top))
        out = unified
    return out


def check_int_pth(spec: ModelSpec, name: str) -> None:
    """vLLM's integer per-token-head caches run on TRITON_ATTN alone (its
    supported_kv_cache_dtypes; customize_spec packs each side's data and one fp32 scale a
    head); refused where kvplan has not sized them."""
    flag = FORMATS[name]
    if any(g.kind in (LayerKind.MLA, LayerKind.INDEXER, LayerKind.COMPRESSED)
           for g in spec.groups):
        raise InputError(f"--kv-cache-dtype {flag}: no vLLM MLA backend stores it (TRITON_ATTN "
                         "alone does, for standard attention)", field="kv_k")
    if spec.model_type in GEMMA4_TYPES:
        raise InputError(f"--kv-cache-dtype {flag}: Gemma 4's padded per-token-head pages are "
                         "sized for fp8_per_token_head only", field="kv_k")


def tq_note(spec: ModelSpec, name: str) -> str:
    """What a TurboQuant plan holds, in a sentence."""
    dim = next(g.head_dim_k for g in spec.groups
               if g.kind in (LayerKind.FULL, LayerKind.SLIDING))
    skipped = sorted(vllm_tq.skip_layers(spec, name))
    backend = "UltraQuant" if name == "uq_4bit" else "TurboQuant"
    text = (f"{vllm_tq.PACKED[name]}: a head's key and value in one {vllm_tq.slot_bytes(name, dim)}"
            f"-byte slot a token ({backend} backend)")
    if skipped:
        text += (f"; vLLM keeps layers {', '.join(map(str, skipped))} at the model's dtype "
                 f"(boundary protection: {dim * 4} bytes a head and token)"
                 + ("" if any(g.kind is LayerKind.SLIDING for g in spec.groups)
                    else ", in the same blocks"))
    else:
        text += "; no boundary layers kept unquantized in a hybrid model"
    return text


def skip_note(patterns: tuple[str, ...], listed: frozenset[int], skipped: frozenset[int],
              groups: tuple[Spec, ...], block: int, asked: int) -> str | None:
    """What --kv-cache-dtype-skip-layers (``listed``: the layers its ``patterns`` keep) and
    TurboQuant's boundary layers (all of them ``skipped``) do to the pool, in a sentence: the
    layers kept, the block grown, the pages padded."""
    parts = []
    if patterns:
        flag = f"--kv-cache-dtype-skip-layers {','.join(patterns)}"
        if not listed:
            parts.append(f"{flag}: no layer of this model matches it, yet vLLM aligns the pool "
                         "for skipped layers")
        elif len(listed) > 8:
            parts.append(f"{flag}: {len(listed)} layers at the model's dtype")
        else:
            parts.append(f"{flag}: layer{'s' if len(listed) > 1 else ''} "
                         f"{', '.join(map(str, sorted(listed)))} at the model's dtype")
    if block != asked:
        parts.append(f"the block grows from {asked} to {block} tokens so a page holds 16 tokens "
                     "of a skipped layer")
    sliding = [g for g in groups if g.kind is LayerKind.SLIDING]
    if sliding:
        seen: dict[str, int] = {}
        for g in groups:
            what = ("a full-attention layer" if g.kind is not LayerKind.SLIDING else
                    "a skipped sliding-window layer" if g.skipped else
                    "a quantized sliding-window layer")
            seen.setdefault(what, g.block)
        parts.append(f"every page is the {groups[0].page:,} bytes the skipped layers share "
                     "(skip_page_size_padded; smaller pages padded to it): one holds "
                     + ", ".join(f"{b} tokens of {w}" for w, b in seen.items()))
    elif skipped and parts:
        parts.append("their pages in the same blocks as the quantized layers'")
    return "; ".join(parts) if parts else None


def _uniform_kind(kind: LayerKind) -> LayerKind:
    """The kind vLLM groups a spec by: an MLAAttentionSpec is a FullAttentionSpec
    (KVCacheSpecRegistry's uniform_type_base_spec), so full-attention, MLA and indexer layers
    of one block size share one group whose page is the sum of their layers' pages
    (kv_cache_interface.py UniformTypeKVCacheSpecs): DeepSeek Sparse Attention's latent and
    indexer, MiniMax-M3's K/V and index keys."""
    if kind in (LayerKind.INDEXER, LayerKind.INDEX, LayerKind.MLA):
        return LayerKind.FULL
    return kind


def _layout(specs: list[Spec]) -> tuple[int, list[Spec]]:
    """vLLM's groups: (layers per group, one Spec per group). Layers of one type and block
    size share a group (UniformTypeKVCacheSpecs); else each spec is a bucket of its own
    (_get_kv_cache_groups_uniform_page_size), skipped layers apart from quantized ones."""
    if (len({(_uniform_kind(s.kind), s.window, s.state) for s in specs}) == 1
            and len({s.block for s in specs}) == 1):
        total = sum(s.layers for s in specs)
        return total, [specs[0]]

    def key(s: Spec) -> tuple[LayerKind, int | None, bool, bool]:
        return _uniform_kind(s.kind), s.window, s.state, s.skipped

    kinds: dict[tuple[LayerKind, int | None, bool, bool], int] = {}
    for s in specs:
        kinds[key(s)] = kinds.get(key(s), 0) + s.layers
    counts = list(kinds.values())
    size = min(counts)
    if max(counts) < 1.5 * size:
        size = max(counts)
    groups: list[Spec] = []
    for k, count in kinds.items():
        proto = next(s for s in specs if key(s) == k)
        groups += [proto] * -(-count // size)
    return size, groups


@dataclass(frozen=True)
class Pool:
    num_blocks: int
    group_size: int
    groups: tuple[Spec, ...]
    #: speculative tokens per step (each adds a state page per recurrent group)
    spec_tokens: int = 0
    #: bytes of one block over all the layers of a one-group pool whose layers' pages differ
    #: (a DSA model's latent and indexer pages); 0: page × group size
    block_bytes: int = 0
    #: the extensible KV cache's segments, each its bytes a block (one per layer region)
    strides: tuple[int, ...] = ()

    @property
    def page(self) -> int:
        return self.groups[0].page

    @property
    def bytes_per_block(self) -> int:
        """Bytes one block number takes over every layer of the group."""
        return self.block_bytes or self.page * self.group_size

    @property
    def min_block(self) -> int:
        return min(g.block for g in self.groups)

    def blocks_per_request(self, max_len: int, in_flight: int, encoder_tokens: int) -> int:
        return sum(g.pages_for(max_len, in_flight, encoder_tokens, self.spec_tokens)
                   for g in self.groups)

    def concurrency(self, max_len: int, in_flight: int, encoder_tokens: int) -> float:
        return self.num_blocks / max(1, self.blocks_per_request(max_len, in_flight,
                                                                encoder_tokens))

    def holds(self, sequences: int, max_len: int, in_flight: int, encoder_tokens: int) -> bool:
        """Whether ``sequences`` requests of ``max_len`` tokens fit in the blocks left once
        the pool holds back its null block."""
        need = self.blocks_per_request(max_len, in_flight, encoder_tokens) * sequences
        return self.num_blocks - 1 >= need

    def reported_tokens(self, max_len: int, in_flight: int, encoder_tokens: int) -> int:
        # "GPU KV cache size": max concurrency × max_model_len for every layout
        # (kv_cache_utils.get_kv_cache_capacity; a sliding-window or chunked group needs
        # only its window's blocks a request, which blocks × block size would miss)
        return int(self.concurrency(max_len, in_flight, encoder_tokens) * max_len)


def pool(spec: ModelSpec, available: int, k: KVFormat, v: KVFormat, block: int,
         mtp: bool = False, spec_tokens: int = 0, gpu: GPU | None = None,
         prefix_caching: bool = True, measured: int | None = None,
         skipped: frozenset[int] = frozenset(), padded: bool = False,
         draft: KVFormat | None = None) -> Pool:
    """Blocks vLLM carves out of ``available`` bytes for one rank's layers (the card decides
    whether a Gated DeltaNet model keeps a prefill checkpoint page; prefix caching, how many
    state pages a request of a hybrid model keeps). ``measured``: the bytes the extensible
    KV cache commits after warmup, in whole granules per layer region, at most the
    ``available`` reservation's blocks (kv_cache_planning.finalize_extensible_kv_cache)."""
    specs = _specs(spec, k, v, block, mtp, spec_tokens, gpu, prefix_caching, skipped, padded,
                   draft)
    if not specs:
        return Pool(0, 1, (), spec_tokens)
    size, groups = _layout(specs)
    whole = len(groups) == 1 and size == sum(s.layers for s in specs)
    if whole:
        per_block = sum(s.page * s.layers for s in specs)
        strides = [s.page for s in specs for _ in range(s.layers)]
    else:
        # _get_kv_cache_bytes_per_block (layer-outer layout): the widest group's pages,
        # which is group_size pages of the unified size, each shared by a layer of each group
        per_block = groups[0].page * size
        strides = [groups[0].page] * size
    blocks = max(0, available // per_block)
    if measured is not None:
        blocks = min(blocks, blocks_within(max(0, measured), per_block, strides))
    return Pool(blocks, size, tuple(groups), spec_tokens, per_block if whole else 0,
                tuple(strides))


def activation_peak(spec: ModelSpec, tp: int, mbt: int, dtype_bytes: int = 2) -> int:
    """Peak activation memory of the profiling pass over ``mbt`` batched tokens.

    Calibrated on vLLM's own profiling log for Llama-3.1-8B (RTX 3090, 20,000 and 29,000
    batched tokens: 2.07 and 2.99 GiB): three hidden-size and three intermediate-size rows
    per token, in the model dtype.
    """
    inter = max(spec.intermediate_size, spec.hidden_size)
    return mbt * (3 * spec.hidden_size + 3 * inter // tp) * dtype_bytes



#: the dtypes kvplan sizes a draft's own cache in (speculative_config kv_cache_dtype; the
#: per-token-head and packed formats have specs of their own, not sized for a draft)
DRAFT_FORMATS = ("f16", "bf16", "fp8_e4m3", "fp8_e5m2")
#: their names in the speculative config (16 bits: the names of the dtypes themselves)
DRAFT_DTYPES = {"f16": "float16", "bf16": "bfloat16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8_e5m2"}


def draft_format(req: EngineRequest) -> KVFormat | None:
    """The draft's own KV dtype (kvplan's draft_kv: speculative_config's kv_cache_dtype; None:
    the target's --kv-cache-dtype, which it inherits), or a one-line refusal."""
    return own_draft_format(req, "vLLM's speculative_config kv_cache_dtype", DRAFT_FORMATS, "")


def _refuse_odd_draft_pages(spec: ModelSpec) -> None:
    """Refuse a draft whose layers' shape (KV heads, head sizes) differs from the target's
    layers of their kind where the target's layers are of several kinds: vLLM then buckets
    layers by their whole spec (_get_kv_cache_groups_uniform_page_size) after unifying page
    sizes, and where the draft lands among the groups is not established."""
    own = spec.groups_for(mtp=False)
    if len({g.kind for g in own}) < 2:
        return
    shapes = {(g.kind, g.n_kv_heads, g.head_dim_k, g.head_dim_v) for g in own}
    for g in spec.groups:
        if g.mtp and (g.kind, g.n_kv_heads, g.head_dim_k, g.head_dim_v) not in shapes:
            assert spec.draft is not None
            raise InputError(f"vLLM with the draft {spec.draft.name} beside {spec.name}'s "
                             f"layers of several kinds: the draft's {g.kind.value} layers "
                             f"({g.n_kv_heads} KV heads × {g.head_dim_k}) are shaped unlike the "
                             "target's, and how vLLM groups them then is not established",
                             field="draft")


def head_buffer(req: EngineRequest, mbt: int) -> int:
    """The hidden states vLLM's EAGLE drafter keeps for every batched token
    (spec_decode/target_dependent_ar/speculator.py: max_num_batched_tokens × the head's hidden
    size, in the model dtype), allocated while the model loads; 0 without an EAGLE head."""
    d = req.spec.draft
    if d is None or d.method == "draft_model":
        return 0
    return mbt * d.spec.hidden_size * 2


def tower_bytes(req: EngineRequest) -> int:
    """The bytes of a model's vision/audio towers as vLLM loads them (0 where it has none, or
    where the weights come whole from a checkpoint's tensors)."""
    return (loaded_weights(req, "bf16", encoder=True).bytes
            - loaded_weights(req, "bf16", encoder=False).bytes)


def tower_note(req: EngineRequest) -> str | None:
    """What vLLM does with a multimodal model's towers that the plan does not count, or what
    --language-model-only leaves out."""
    if not req.spec.params.encoder:
        return ("the model has no vision or audio tower: --language-model-only changes nothing"
                if req.settings.language_model_only else None)
    tower = tower_bytes(req)
    if req.settings.language_model_only:
        # config/multimodal.py: every modality's limit 0; interfaces.py _mark_tower_model
        # builds no tower whose modalities are all at 0, and profile_run skips the encoder
        return (f"--language-model-only: the towers ({tower / GiB:.2f} GiB of weights) are "
                "not built and the encoder is not profiled; the server takes text only")
    # gpu_model_runner.py profile_run: with any modality allowed, the encoder runs first on
    # dummy items of the largest size, its outputs kept in the encoder cache while the
    # language model's dummy batch runs
    return ("vLLM profiles the vision/audio encoder at start-up on its largest inputs (\"Encoder "
            "cache will be initialized with a budget of N tokens, and profiled with M items of "
            "the maximum feature size\"): that activation peak and the encoder outputs it keeps "
            "are not counted here, and the KV pool is smaller by them; serving text only, "
            f"--language-model-only builds no tower: "
            f"{tower / GiB:.2f} GiB less weights and no encoder profile")


def towers_on_first_stage(req: EngineRequest, shares: list[RankShare]) -> list[RankShare]:
    """The stages' shares with the vision/audio towers on the first stage alone: vLLM builds a
    tower on the first pipeline stage only, where the encoders run (interfaces.py
    _mark_tower_model skips it "on pipeline stages after the first"), not spread with the
    decoder's layers as the shares place every other weight."""
    p = req.parallel
    if p.pp == 1 or not req.cache.encoder or req.weights_bytes is not None:
        return shares
    tower = tower_bytes(req)
    if tower <= 0:
        return shares
    n = req.spec.decoder_layers
    out = [replace(sh, weights_bytes=sh.weights_bytes
                   - tower * len(stage_layers(n, p.pp, sh.stage)) // n // p.tp
                   + (tower // p.tp if sh.stage == 0 else 0)) for sh in shares]
    check_budget(req, out)
    return out


def serve_command(req: EngineRequest, max_len: int, util: float | None, k_name: str,
                  mbt: int) -> list[str]:
    """The `vllm serve` command line of a plan: the flags it sets (a batch-token budget and a
    memory utilization only where the plan was given one: with the extensible KV cache an
    explicit utilization caps the budget below the whole card)."""
    cmd = [f"vllm serve {model_ref(req.spec)}", f"--max-model-len {max_len}",
           f"--max-num-seqs {req.sequences}"]
    if util is not None:
        cmd.append(f"--gpu-memory-utilization {util:g}")
    if k_name != "auto":
        cmd.append(f"--kv-cache-dtype {k_name}")
    named = vllm_backends.backend_name(req.settings.attention_backend)
    if named is not None:
        cmd.append(f"--attention-backend {named}")
    if req.settings.kv_cache_dtype_skip_layers:
        cmd.append("--kv-cache-dtype-skip-layers "
                   + " ".join(req.settings.kv_cache_dtype_skip_layers.split(",")))
    cmd += parallel_flags(req.parallel, "--tensor-parallel-size", "--pipeline-parallel-size",
                          "--data-parallel-size")
    if req.settings.max_num_batched_tokens:
        cmd.append(f"--max-num-batched-tokens {mbt}")
    if not req.settings.prefix_caching:
        cmd.append("--no-enable-prefix-caching")
    if req.settings.enforce_eager:
        cmd.append("--enforce-eager")
    if req.settings.language_model_only:
        cmd.append("--language-model-only")
    if req.settings.lora is not None:
        cmd += req.settings.lora.flags("--max-loras")
    if not req.settings.extensible_kv_cache and not on_xpu(req):
        # (on Intel's XPU it is off without being asked)
        cmd.append("--no-enable-extensible-kv-cache")
    elif req.settings.extensible_kv_cache_asked:
        cmd.append("--enable-extensible-kv-cache")
    if req.spec.draft is not None:
        # a draft model of its own (method draft_model, found from the checkpoint): its
        # tokens a step are required; the pool does not depend on them (slots are capped at
        # max_model_len)
        d = req.spec.draft.spec
        n = req.settings.speculative_tokens or DRAFT_TOKENS
        method = ("" if req.spec.draft.method == "draft_model"
                  else f"\"method\": \"{req.spec.draft.method}\", ")
        fmt = draft_format(req)
        dtype = (f", \"kv_cache_dtype\": \"{DRAFT_DTYPES[fmt.name]}\""
                 if fmt is not None else "")
        cmd.append(f"--speculative-config '{{{method}\"model\": \"{d.hub_repo or d.name}\", "
                   f"\"num_speculative_tokens\": {n}{dtype}}}'")
    elif req.cache.mtp:
        # the model's next-n layers as the draft (vLLM's SpeculativeConfig maps each
        # architecture's MTP model from method "mtp"), one token a step unless told more
        n = req.settings.speculative_tokens or 1
        cmd.append(f"--speculative-config '{{\"method\": \"mtp\", "
                   f"\"num_speculative_tokens\": {n}}}'")
    return cmd


def _no_pp_no_lora(req: EngineRequest, cls: str, pp_hint: str = "") -> None:
    """Refuse what a vLLM model class implementing neither SupportsPP nor SupportsLoRA cannot
    serve: pipeline parallelism ("Pipeline parallelism is not supported for this model") and
    LoRA adapters."""
    if req.parallel.pp > 1:
        raise InputError(f"vLLM's {cls} does not support pipeline parallelism: use --pp 1"
                         f"{pp_hint}", field="pp")
    if req.settings.lora is not None:
        raise InputError(f"vLLM's {cls} takes no LoRA adapters: plan it without "
                         "--enable-lora", field="enable_lora")


def _zaya(req: EngineRequest) -> EngineRequest:
    """ZAYA under vLLM 0.34.0 (model_executor/models/zaya.py): ZayaForCausalLM implements
    HasInnerState and IsHybrid only (no pipeline parallelism, no LoRA) and raises on
    speculative decoding; its attention and CCA projections are ReplicatedLinear, so every
    rank holds them whole, with all the KV heads and the whole CCA state
    (is_kv_cache_tp_replicated), the experts alone split (FusedMoE)."""
    _no_pp_no_lora(req, "ZayaForCausalLM")
    if req.cache.mtp or req.settings.speculative_tokens:
        raise InputError("vLLM's ZayaForCausalLM refuses speculative decoding (\"ZAYA1 does "
                         "not support speculative decoding\")", field="speculative_tokens")
    p = req.spec.params
    # everything but the experts, the embedding and the lm_head (vocab-parallel), the
    # residual scales and norms included
    split = sum(m.params for m in p.modules if m.role in ("experts", "embed", "head"))
    return replace(req, spec=replace(req.spec, params=replace(p, replicated=p.total - split)))


def startup_holding(req: EngineRequest) -> str:
    """What the process holds before vLLM's snapshot, named for the platform: on ROCm the HIP
    context and hipBLAS's handles (torch's cuBLAS calls map to hipBLAS/hipBLASLt there), on
    CUDA the CUDA context and cuBLAS's. The bytes are BEFORE_SNAPSHOT either way (measured
    on an H200 only)."""
    if _has_cards_of(req, "amd"):
        return "HIP context and hipBLAS"
    return "CUDA context and cuBLAS"


def float16_fallback(req: EngineRequest, weights_format: str) -> str:
    """The note for a bfloat16 checkpoint (or a float32 one, which --dtype auto serves in the
    platform's first dtype) on NVIDIA cards without bfloat16 (compute capability below 8.0:
    T4 and the RTX 20 series, the oldest its wheels run on): config/model.py
    _resolve_auto_dtype falls back to float16 there with a warning, and a cache of the
    model's dtype follows; the bytes are the same. "" where no card is such."""
    old = [g for g in req.gpus if g is not None and g.cuda_family is not None
           and g.cuda_family < 8]
    if weights_format != "bf16" or not old:
        return ""
    return (f"{old[0].name} (compute capability {old[0].compute_capability}) has no bfloat16: "
            f"vLLM {RELEASE}'s --dtype auto serves these weights in float16 (\"Your device "
            "... doesn't support torch.bfloat16. Falling back to torch.float16 for "
            "compatibility.\"; an explicit --dtype bfloat16 stops at start-up), and a cache of "
            "the model's dtype is float16 too; the bytes are the same")


def on_xpu(req: Any) -> bool:
    """Whether the plan's cards (an EngineRequest's or a Query's) are Intel's (vLLM's XPU
    platform), where vLLM 0.34 keeps the
    extensible KV cache off: config/vllm.py _resolve_extensible_kv_cache supports it on CUDA
    and ROCm only, so the 0.92 budget and its start-up check apply."""
    return _has_cards_of(req, "intel")


def _has_cards_of(req: Any, vendor: str) -> bool:
    """Whether any of ``req``'s cards (an EngineRequest's or a Query's) is ``vendor``'s."""
    return any(g is not None and g.vendor == vendor for g in req.gpus)


def _refuse_extensible_asked(req: EngineRequest) -> None:
    """--enable-extensible-kv-cache where vLLM 0.34 cannot have it: config/vllm.py
    _resolve_extensible_kv_cache raises ValueError at start-up where it was asked for on a
    platform other than CUDA and ROCm, or beside a pool pinned by --kv-cache-memory-bytes."""
    s = req.settings
    if not s.extensible_kv_cache_asked:
        return
    field = "enable_extensible_kv_cache"
    if not s.extensible_kv_cache:
        raise InputError("enable_extensible_kv_cache and no_extensible_kv_cache contradict "
                         "each other: give one", field=field)
    why = ("it is only supported on CUDA and ROCm" if on_xpu(req)
           else "it sizes the KV cache from measured memory, which kv_cache_memory_bytes "
           "overrides" if req.kv_budget_bytes is not None else None)
    if why:
        raise InputError(f"--enable-extensible-kv-cache: vLLM stops at start-up "
                         f"(\"enable_extensible_kv_cache: {why}\"); leave it to vLLM's "
                         f"default, which is off there", field=field)


def plan(req: EngineRequest) -> EngineReport:
    refuse_architecture("vLLM", req.spec, UNSUPPORTED)
    _refuse_extensible_asked(req)
    if req.settings.extensible_kv_cache and on_xpu(req):
        req = replace(req, settings=replace(req.settings, extensible_kv_cache=False))
    if req.settings.language_model_only and req.cache.encoder:
        # no tower is built: its weights are not on any card
        req = replace(req, cache=replace(req.cache, encoder=False))
    if req.spec.mm_prefix and not req.cache.encoder:
        # text-only serving turns image-prefix attention off (is_mm_prefix_lm with
        # supports_multimodal False), so backends without it are eligible again
        req = replace(req, spec=replace(req.spec, mm_prefix=False))
    # DeciLMForCausalLM (models/nemotron_nas.py) builds attention (num_attention_heads //
    # n_heads_in_group KV heads) only where block_configs' attention is not a no-op, so only
    # those layers get a cache; replace_with_linear it does not build
    refuse_nas_layout("vLLM", req.spec)
    refuse_layout("vLLM", req.spec, {})
    if req.spec.model_type in BAILING_TYPES and req.settings.lora is not None:
        # BailingMoeV3ForCausalLM (models/bailing_moe_v3.py) and BailingMoeV25ForCausalLM
        # (bailing_moe_linear.py) implement IsHybrid and SupportsPP, not SupportsLoRA
        raise InputError("vLLM's Bailing hybrids (BailingMoeV3ForCausalLM, "
                         "BailingMoeV25ForCausalLM) take no LoRA adapters: plan them without "
                         "--enable-lora", field="enable_lora")
    if req.spec.model_type == "zaya":
        req = _zaya(req)
    if req.spec.model_type == "zamba2":
        # Zamba2ForCausalLM (models/zamba2.py) implements neither SupportsPP nor SupportsLoRA:
        # vLLM stops at start-up ("Pipeline parallelism is not supported for this model"), and
        # its model asserts that no LoRA config is set
        _no_pp_no_lora(req, "Zamba2ForCausalLM", " (tensor parallelism splits it)")
    if has_kind(req.spec, LayerKind.COMPRESSED):
        refuse_compressed(req, "vLLM")
        if req.settings.lora is not None:
            raise InputError("kvplan does not size vLLM's LoRA slots for DeepSeek-V4's "
                             "compressed attention: plan it without --enable-lora",
                             field="enable_lora")
        from .vllm_dsv4 import plan as dsv4_plan
        named = vllm_backends.backend_name(req.settings.attention_backend)
        if named in ("FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120"):
            # models/deepseek_v4/nvidia/model.py _select_dsv4_attn_cls
            raise InputError(f"vLLM stops at start-up with --attention-backend {named}: \""
                             f"{named} is not a DeepSeek V4 attention backend. Use "
                             "FLASHINFER_MLA_SPARSE_DSV4 for DeepSeek V4 FlashInfer sparse "
                             "MLA.\"", field="attention_backend")
        report = dsv4_plan(req)
        if named is not None:
            report = replace(report, notes=(*report.notes, (
                f"--attention-backend {named}: kvplan does not check it against DeepSeek-V4's "
                "attention; the pool is the one kvplan plans for vLLM's own pick")))
        return report
    s, opts = req.settings, req.cache
    k_name = single_format(NAME, opts, FORMATS)
    tq = opts.kv_k.name in vllm_tq.PACKED
    if tq:
        vllm_tq.check(req.spec, opts.kv_k.name)
    if opts.kv_k.name == "uq_4bit":
        vllm_backends.check_rocm_only(req.gpus, opts.kv_k.name)
    if opts.kv_k.name in ("int8_pth", "int4_pth"):
        check_int_pth(req.spec, opts.kv_k.name)
    # --kv-cache-dtype-skip-layers and TurboQuant's boundary layers (vllm_skip)
    patterns = vllm_skip.parse(s.kv_cache_dtype_skip_layers)
    vllm_skip.check(req.spec, opts.kv_k.name, patterns)
    skipped = vllm_skip.skipped(req.spec, opts.kv_k.name, patterns)
    padded = vllm_skip.padded(req.spec, opts.kv_k.name, patterns)
    if opts.hot_format is not None or opts.keep_fraction < 1:
        raise InputError("vLLM has no hot/cold mix or token eviction", field="engine")
    if opts.mtp and not req.spec.has_mtp:
        # speculative_config method "mtp" builds the draft from the model's own next-n layers
        raise InputError(f"vLLM with --mtp: {req.spec.name} has no MTP / next-n layers in its "
                         "config (num_nextn_predict_layers or mtp_num_hidden_layers) for the "
                         "draft", field="mtp")
    check_vocab(req.spec, "vLLM", exact=True)
    draft_kv = draft_format(req)
    if req.spec.draft is not None:
        _refuse_odd_draft_pages(req.spec)
        d = req.spec.draft.spec
        limit = d.vllm_max_len or d.max_position_embeddings
        if req.spec.draft.method != "draft_model" and d.head.rope_stretches:
            # config/speculative.py: an EAGLE head of a plain, linear or llama3 rotary
            # embedding shares the target's positions, its max_position_embeddings raised
            limit = None
        if limit and req.context > limit:
            # config/vllm.py _limit_max_model_len_to_draft: "reducing max_model_len"
            raise InputError(f"vLLM lowers max_model_len to the draft's: {d.name} serves "
                             f"{limit:,} tokens, so a context of {req.context:,} is not served "
                             "with this draft", field="context")
    n_predict = req.spec.mtp_layers if req.spec.draft is None else 0
    if (opts.mtp and n_predict and s.speculative_tokens > n_predict
            and s.speculative_tokens % n_predict):
        # spec_decode/speculator_config.py resolve_num_speculative_tokens: a draft of several
        # MTP modules is reused whole ("must be divisible by n_predict")
        raise InputError(f"vLLM with --mtp: --speculative-tokens {s.speculative_tokens} must be "
                         f"at most or a multiple of the model's {n_predict} MTP layers "
                         f"(n_predict)", field="speculative_tokens")
    if req.spec.checkpoint is not None and req.spec.checkpoint.parts > 1:
        raise InputError(f"vLLM loads a GGUF model from a single file; this one is split in "
                         f"{req.spec.checkpoint.parts}: merge it with llama-gguf-split --merge",
                         field="engine")
    if s.block_size and s.block_size % KERNEL_STEP:
        # CacheConfig takes any positive block size, but attention backend selection drops
        # every CUDA backend whose kernel sizes refuse it ("block_size not supported":
        # FlashAttention, Triton and the MLA backends take multiples of 16 only)
        raise InputError(f"vLLM's attention backends need --block-size to be a multiple of "
                         f"{KERNEL_STEP}; got {s.block_size}", field="block_size")
    # None: the extensible KV cache's 1.0 (config/cache.py resolved_gpu_memory_utilization)
    util = s.gpu_memory_utilization
    p = req.parallel
    # --dtype auto serves a float32 checkpoint in 16 bits (config/model.py _resolve_auto_dtype:
    # the platform's first dtype, bfloat16 on CUDA and ROCm): 2 bytes a weight
    # --data-parallel-size: every DP rank runs its own engine and cache, and FusedMoE flattens
    # its tensor-parallel group across them (fused_moe/config.py FusedMoEParallelConfig.make:
    # without expert parallelism the routed experts are split over tp × dp ranks)
    weights, shares = rank_weights(req, f32_as="bf16", expert_ranks=p.dp)
    if req.spec.model_type == "zaya":
        # every rank keeps all KV heads and the whole CCA state (_zaya)
        shares = [replace(sh, spec=replace(sh.spec, groups=req.spec.groups)) for sh in shares]
    shares = towers_on_first_stage(req, shares)
    # --cpu-offload-gb: what each rank moves to host memory is not on its card
    moved, shares = offload_shares(req, weights, shares, stage_layers, p.dp)
    dsa = has_kind(req.spec, LayerKind.INDEXER)
    hybrid = any(g.kind.is_recurrent for g in req.spec.groups)
    # the backend vLLM picks where it decides the block (a --block-size it refuses moves
    # selection down its list: platforms/cuda.py get_attn_backend_cls)
    minimax = req.spec.model_type in MINIMAX_M3_TYPES
    # (TurboQuant's own backend takes 16/32/64/128-token kernel blocks, 64 by preference)
    if hybrid:
        # the attention layers' backend, chosen where select is not asked
        vllm_backends.check_nvfp4(req.spec, shares[0].gpu, opts.kv_k)
    # --attention-backend: the backend named, checked against every card (None where kvplan
    # leaves it to vLLM: its own pick is planned, with a note)
    named = vllm_backends.backend_name(s.attention_backend)
    forced, named_note = (vllm_backends.forced(req.spec, tuple(req.gpus),
                                               opts.kv_k, named, s.block_size or None,
                                               skipped=bool(skipped))
                          if named is not None else (None, None))
    choice = forced if forced is not None else (
        None if dsa or hybrid or minimax or tq
        else vllm_backends.select(req.spec, shares[0].gpu, opts.kv_k, s.block_size or None))
    backend = choice.backend if choice is not None else None
    if minimax:
        check_minimax(req, k_name)
        block = MINIMAX_BLOCK
    elif s.block_size:
        block = s.block_size
    elif forced is not None:
        # the named backend's preference: 64 where its kernels take it (CUTLASS_MLA: 128)
        block = forced.backend.preferred()
    elif dsa or hybrid:
        block = default_block(req.spec, shares[0].gpu, opts.kv_k)
    else:
        # the chosen backend's preference (default_block's answer, without selecting twice)
        block = backend.preferred() if backend is not None else DEFAULT_BLOCK
    asked_block = block
    if padded:
        # the skipped layers share the block pool (platforms/interface.py
        # _align_heterogeneous_kv_block_size)
        gpu0 = shares[0].gpu
        block = vllm_tq.aligned_block(block, *vllm_skip.page_bytes(
            req.spec, opts.kv_k.name, skipped, gpu0.cuda_family if gpu0 is not None else 10))
    if dsa:
        k_name = check_dsa(req.spec, shares[0].gpu, opts.kv_k)
        if s.block_size and s.block_size % DSA_BLOCK:
            # the indexer backend takes multiples of 64 only: no valid attention backend
            raise InputError(f"vLLM's DeepSeek Sparse Attention kernels need --block-size to "
                             f"be a multiple of {DSA_BLOCK}; got {s.block_size}",
                             field="block_size")
        block = s.block_size or DSA_BLOCK
    # a ModelOpt checkpoint calibrated for an FP8 KV cache turns --kv-cache-dtype auto into
    # fp8_e4m3 (utils/torch_utils.py resolve_kv_cache_dtype_string, applied in
    # EngineArgs.create_engine_config): a 16-bit plan has to name its dtype
    pinned_16 = k_name == "auto" and fp8_kv_checkpoint(req.spec)
    if pinned_16:
        k_name = "bfloat16"
    gpu0 = None if req.kv_budget_bytes is not None else shares[0].gpu
    encoder = opts.images * req.spec.cross_tokens_per_image
    non_torch = NON_TORCH + (NCCL if p.ranks_per_replica > 1 else 0)
    # --enable-lora: the adapter slots each rank allocates while the model loads (counted in
    # vLLM's "Model loading took" figure, so off the KV budget)
    lora = for_vllm(s.lora) if s.lora is not None else None
    adapters, expert_adapters = (lora_split(req.spec, lora, p) if lora is not None
                                 else ([0] * len(shares), [0] * len(shares)))
    if req.kv_budget_bytes is None and any(sh.gpu is None for sh in shares):
        raise need_gpu()
    if req.kv_budget_bytes is None and not s.extensible_kv_cache:
        # v1/worker/utils.py request_memory: without the extensible cache the utilization's
        # share must be free at start-up, which a unified memory's GPU share may not be
        for sh in shares:
            g = sh.gpu
            if g is None or g.usable_bytes >= g.total_bytes:
                continue
            eff = ESTIMATE_UTILIZATION if util is None else util
            wanted = math.ceil(g.total_bytes * eff)
            if g.usable_bytes - BEFORE_SNAPSHOT < wanted:
                raise InputError(
                    f"vLLM stops at start-up: the {format_bytes(g.usable_bytes - BEFORE_SNAPSHOT, 2)}"
                    f" free on {g.chip} are less than --gpu-memory-utilization {eff:g} of its "
                    f"{format_bytes(g.total_bytes, 2)} ({format_bytes(wanted, 2)}; \"Free memory "
                    "on device ... is less than desired GPU memory utilization\"): lower it, or "
                    "keep the extensible KV cache", field="gpu_memory_utilization")

    # a multimodal prefix-LM model serving its towers takes its largest item in one batch
    mm_floor = (GEMMA4_VIDEO_TOKENS if req.spec.model_type in GEMMA4_TYPES
                and req.spec.mm_prefix and req.cache.encoder else 0)

    def batched(sequences: int, length: int) -> int:
        # the default follows --max-num-seqs × --max-model-len, so it changes with the plan
        return s.max_num_batched_tokens or default_batched_tokens(gpu0, sequences, length,
                                                                  mm_floor)

    sized: dict[int, tuple[int, list[Budget], list[Pool], int]] = {}

    def pools_for(mbt: int) -> tuple[int, list[Budget], list[Pool], int]:
        """(activation peak, each stage's budget, pools sized to the tightest, the tightest
        stage) for ``mbt`` batched tokens."""
        if mbt not in sized:
            act = activation_peak(req.spec, p.tp, mbt)
            held = non_torch + head_buffer(req, mbt)
            budgets = [rank_budget(sh.gpu.total_bytes if sh.gpu is not None else None, util,
                                   sh.weights_bytes + held + lb, act, req.kv_budget_bytes,
                                   s.extensible_kv_cache,
                                   sh.gpu.usable_bytes if sh.gpu is not None else None)
                       for sh, lb in zip(shares, adapters, strict=True)]
            raw = [pool(sh.spec, max(0, b.reserved), opts.kv_k, opts.kv_v, block, opts.mtp,
                        s.speculative_tokens, sh.gpu, s.prefix_caching, b.measured,
                        skipped, padded, draft_kv)
                   for sh, b in zip(shares, budgets, strict=True)]
            tight = min(range(len(raw)), key=lambda i: raw[i].num_blocks)
            least = raw[tight].num_blocks
            sized[mbt] = (act, budgets, [Pool(least, pl.group_size, pl.groups, pl.spec_tokens,
                                              pl.block_bytes, pl.strides) for pl in raw],
                          tight)
        return sized[mbt]

    def serves(sequences: int, length: int) -> bool:
        """Whether vLLM started with these --max-num-seqs and --max-model-len holds them all."""
        mbt = batched(sequences, length)
        flight = in_flight_tokens(mbt, p.pp)
        _, budgets, pls, _ = pools_for(mbt)
        # the committed bytes are at most the reservation: both positive
        return (min(b.kv_bytes for b in budgets) > 0
                and all(pl.holds(sequences, length, flight, encoder) for pl in pls))

    mbt = batched(req.sequences, req.context)
    in_flight = in_flight_tokens(mbt, p.pp)
    act, budgets, pools, binding = pools_for(mbt)
    num_blocks = pools[binding].num_blocks
    main = pools[binding]
    max_len = req.context
    conc = min(pl.concurrency(max_len, in_flight, encoder) for pl in pools)
    tokens = main.reported_tokens(max_len, in_flight, encoder)

    max_ctx = (largest(lambda n: n == 0 or serves(req.sequences, n), 1 << 31)
               if main.groups else 0)
    max_seqs = (largest(lambda n: n == 0 or serves(n, max_len), MAX_SEQUENCES)
                if main.groups else 0)
    fits = serves(req.sequences, max_len)
    budget = budgets[binding]
    lines = startup_lines(
        budget.reserved, main.bytes_per_block,
        lambda n: main.blocks_per_request(n, in_flight, encoder) * main.bytes_per_block,
        max_len, tokens, conc, num_blocks if budget.measured is not None else None, util,
        main.strides)
    notes = []
    if tq:
        notes.append(tq_note(req.spec, opts.kv_k.name))
    half = float16_fallback(req, weights.format)
    if half:
        notes.append(half)
    if patterns and not padded:
        notes.append(f"--kv-cache-dtype-skip-layers {','.join(patterns)}: the cache is the "
                     "model's dtype already, so it changes nothing")
    if padded:
        listed = skipped - vllm_skip.skipped(req.spec, opts.kv_k.name, ())
        said = skip_note(patterns, listed, skipped, main.groups, block, asked_block)
        if said:
            notes.append(said)
    gone = PREVIOUSLY_SUPPORTED.get(req.spec.architecture)
    if gone:
        notes.append(f"vLLM removed its own {req.spec.architecture} after {gone}: it starts only "
                     "through its Transformers backend, where transformers' class (or the "
                     "checkpoint's remote code) supports it, with the cache planned here; else "
                     f"pin vllm=={gone}")
    if req.spec.model_type == "longcat_flash_ngram":
        # LongcatFlashNgramForCausalLM runs on the model runner (V2, the only one from 0.34.0),
        # whose LongcatNgramModelState keeps an inputs_embeds buffer of max_num_tokens × hidden
        buffer = format_bytes(mbt * req.spec.hidden_size * req.spec.dtype_bytes, 2)
        notes.append("LongCat-Flash-Lite's n-gram embedding keeps each request's last tokens "
                     "in vLLM's model runner; the runner's n-gram input buffer "
                     f"({buffer}, batched tokens × hidden) is not counted")
    if named_note is not None:
        notes.append(named_note)
    if choice is not None and choice.passed_over:
        # get_attn_backend_cls's warning when --block-size passed over a preferred backend
        lines.insert(0, f"--block-size {block} precluded higher-priority backend(s) "
                        f"{', '.join(choice.passed_over)}. Using {choice.backend.name} "
                        "instead, which may result in "
                        "reduced performance. Consider removing --block-size to auto-select "
                        "the optimal block size.")
    elif backend is not None and not s.block_size and block != DEFAULT_BLOCK:
        # update_block_size_for_backend's info line when the preference is not 16
        lines.insert(0, f"Setting kv cache block size to {block} for {backend.name} "
                        "backend(s).")
    if not s.max_num_batched_tokens and mm_floor > batch_tier(gpu0):
        # engine/arg_utils.py: the prefix-LM floor is logged as it raises the card's default,
        # before the attention backend's lines
        lines.insert(0, f"Raising max_num_batched_tokens from {batch_tier(gpu0)} to {mm_floor} "
                        f"to accommodate 'video' input for prefix-LM model "
                        f"{model_ref(req.spec)}.")
    if pinned_16:
        notes.append("the checkpoint's kv_cache_quant_algo FP8 makes vLLM's --kv-cache-dtype "
                     "auto an fp8 cache: this 16-bit plan passes --kv-cache-dtype bfloat16 "
                     "(plan --kv fp8 for what auto gives)")
    if any(g.kind in (LayerKind.SLIDING, LayerKind.CHUNKED) for g in req.spec.groups):
        notes.append(f"local-attention layers reserve their window plus the {in_flight:,} "
                     f"in-flight tokens ({p.pp + 1} × max_num_batched_tokens {mbt:,}) per "
                     "request; lower --max-num-batched-tokens to fit more")
    if any(g.state for g in main.groups):
        notes.append(f"hybrid model: attention blocks hold {main.min_block} tokens so a page "
                     "also fits one recurrent state")
    if any(g.state for g in main.groups) and not s.prefix_caching:
        notes.append("prefix caching off: mamba_cache_mode \"none\", one state page a request "
                     "per recurrent group (two with it on), and no prefix reuse")
    if any(g.checkpoint_pages for g in main.groups):
        which = ("its Mamba2 layers (MambaMixer2)" if has_kind(req.spec, LayerKind.MAMBA)
                 else "FlashKDA's prefill on this card" if flashkda_checkpoints(req.spec,
                                                                                shares[0].gpu)
                 else "FlashInfer's Gated DeltaNet prefill on this card")
        notes.append(f"a third state page per request: the prefill checkpoint {which} "
                     "exports for prefix caching")
    if dsa:
        per_token = main.bytes_per_block // max(1, main.min_block)
        notes.append(f"DeepSeek Sparse Attention: blocks of {block} tokens (its kernels take "
                     f"multiples of {DSA_BLOCK}), the "
                     f"indexer's keys in fp8 with a scale per {INDEXER_QUANT_BLOCK} values "
                     f"beside the {'fp8_ds_mla' if k_name == 'fp8' else 'bf16'} latent; "
                     f"{per_token:,} bytes a token per rank")
        if req.spec.model_type == "hy_v4":
            # models/hy_v4/nvidia/hc.py: hc_mult residual channels in place of one
            notes.append("Hy4 (models/hy_v4): the latent through a FLASHMLA_SPARSE backend "
                         "that applies its attention sinks, prefill kept on the sparse path; "
                         "its hyper-connections' residual channels widen the activations "
                         "beyond the activation-peak estimate here")
    elif forced is not None:
        sizes = "/".join(map(str, backend.sizes)) if backend is not None else ""
        notes.append(f"--attention-backend {named}: vLLM runs it for every attention layer "
                     f"(checked here against the layers, the KV dtype and the card; kernel "
                     f"blocks of {sizes} tokens): blocks of {main.min_block} tokens")
    elif backend is not None and (block != DEFAULT_BLOCK or backend.sizes != (KERNEL_STEP,)):
        sizes = "/".join(map(str, backend.sizes))
        notes.append(f"vLLM's attention backend here is {backend.name} (kernel blocks of "
                     f"{sizes} tokens): blocks of {block} tokens")
    if opts.kv_k.name.startswith("fp8") and opts.kv_k.name != "fp8_pth" and not dsa:
        notes.append("fp8 KV uses per-tensor scales (1.0 unless calibrated: "
                     "--calculate-kv-scales or a checkpoint with scales)")
    graphs = ("public logs print 0.1–0.8 GiB a card for models up to 35B and several GiB for "
              "large MoE models under tensor parallelism (--enforce-eager captures none; "
              "--kv-cache-memory-bytes, kvplan's --kv-budget, pins the pool)")
    if req.kv_budget_bytes is None and on_xpu(req) and util is None:
        notes.append(f"on Intel's XPU vLLM {RELEASE} keeps the extensible KV cache off (it "
                     "runs on CUDA and ROCm only): the cache gets --gpu-memory-utilization "
                     f"{ESTIMATE_UTILIZATION:g} of the card less the weights and the activation "
                     "peak, which must be free at start-up")
    if req.kv_budget_bytes is None and budget.measured is None and not s.enforce_eager:
        # gpu_worker.py determine_available_memory without the extensible cache: the
        # CUDA-graph estimate (profile_cudagraph_memory) comes off the budget
        notes.append("without the extensible KV cache vLLM also sets aside the CUDA-graph "
                     "memory it estimates at start-up (\"CUDA graph memory profiling is "
                     "enabled ...\"), which kvplan does not subtract: " + graphs)
    if req.kv_budget_bytes is None and budget.measured is not None:
        # v1/worker/extensible_kv_cache.py measure_kv_cache_bytes, after warmup and capture;
        # on a unified memory what is free is the GPU's share, or what the user saw free
        limited = next((sh.gpu for sh in shares if sh.gpu is not None
                        and sh.gpu.usable_bytes < sh.gpu.total_bytes), None)
        card = ("the card" if limited is None else
                f"the {format_bytes(limited.usable_bytes, 2)} of {limited.chip}'s memory "
                "free to it")
        notes.append(
            f"vLLM {RELEASE} sizes the cache after warmup: {num_blocks:,} blocks "
            f"({format_bytes(num_blocks * main.bytes_per_block, 2)}) of the "
            f"{format_bytes(max(0, budget.reserved), 2)} it reserves, "
            + (f"{card} less what the process held at start-up "
               f"({format_bytes(BEFORE_SNAPSHOT, 2)}: {startup_holding(req)}), what it "
               f"uses since, the activation peak and a margin of "
               f"{format_bytes(budget.margin, 2)} (max(1 GiB, 0.75 × the peak))"
               if budget.headroom_binds else
               f"what --gpu-memory-utilization {util:g} leaves less the activation peak")
            + ("" if s.enforce_eager else
               "; its CUDA graphs (\"Graph capturing finished in N secs, took X GiB\") come "
               "off it too, which kvplan does not subtract: " + graphs))
        if util is not None and 0.7 < util < 1.0 and budget.withheld >= GiB:
            # extensible_kv_cache.py measure_kv_cache_blocks: an explicit utilization under
            # 1.0 that keeps 1 GiB or more of free memory out of the cache is warned about
            assert budget.requested is not None
            # (logged while the workers measure, before the capacity line and the commit)
            at = next((i for i, line in enumerate(lines)
                       if line.startswith("GPU KV cache size")), len(lines) - 1)
            lines.insert(at, f"gpu_memory_utilization={util:g} caps this instance at "
                             f"{format_gib(budget.requested)} GiB, keeping "
                             f"{format_gib(budget.withheld)} GiB of free device memory out of "
                             "the KV cache. ...")
    tower = tower_note(req)
    if tower:
        notes.append(tower)
    if req.spec.draft is not None:
        dk = draft_kv or opts.kv_k
        k_row, v_row = draft_row_bytes(req.spec, dk, draft_kv or opts.kv_v, p.tp)
        dm = req.spec.draft
        notes.append(f"draft {dm.name} (speculative_config method {dm.method}): "
                     f"its {req.spec.mtp_layers} layer(s) keep their K and V in the target's "
                     f"blocks, in {dk.name}"
                     + (" (its kv_cache_dtype)" if draft_kv else "")
                     + f", {k_row + v_row:,} bytes a token per rank, "
                     "sized "
                     "with the target's; its weights are loaded before the pool is sized; "
                     "the KV pool does not depend on num_speculative_tokens (a request's "
                     "slots stop at max_model_len)")
        if dm.method != "draft_model":
            borrowed = "embedding" + (" and lm_head" if dm.method == "eagle" else "")
            notes.append(f"the {dm.method} head borrows the target's token {borrowed} and keeps "
                         f"{mbt:,} rows of its hidden states (max_num_batched_tokens)"
                         + ("; the target must implement SupportsEagle3 (Llama, Qwen2/3, "
                            "gpt-oss, DeepSeek and others)" if dm.method == "eagle3" else ""))
    if lora is not None:
        notes.append(lora_note(req.spec, lora, adapters[binding], p.tp,
                               shares[binding].weights_bytes))
    cmd = serve_command(req, max_len, util, k_name, mbt)
    # config/model.py _get_and_verify_max_len: a longer --max-model-len is a ValueError unless
    # the variable allows it (then a warning)
    long = past_derived("vLLM", "--max-model-len", max_len, req.spec.vllm_max_len,
                        "VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    if long:
        cmd[0] = f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 {cmd[0]}"
        notes.append(long)
    if s.block_size:
        # (as asked: vLLM's own alignment may grow it, as the plan does)
        cmd.append(f"--block-size {s.block_size}")
    offload_tokens = 0
    if s.offload_bytes:
        offload_tokens = int(s.offload_bytes // max(1, main.bytes_per_block)) * main.min_block
        cmd.append(f"--kv-offloading-size {s.offload_bytes * p.tp / GiB:g}")
        notes.append(f"CPU offload tier holds about {offload_tokens:,} more tokens per replica")
    extra: dict[str, Any] = {}
    if lora is not None:
        extra["lora"] = {"max_loras": lora.slots, "max_lora_rank": lora.rank,
                         "fully_sharded_loras": lora.fully_sharded,
                         "lora_target_modules": list(lora.targets),
                         "bytes_per_card": adapters[binding], "bytes_per_stage": adapters,
                         "expert_bytes_per_stage": expert_adapters}
    if s.cpu_offload_bytes:
        cmd.append(f"--cpu-offload-gb {s.cpu_offload_bytes / GiB:g}")
        extra["cpu_offload"] = offload_extra(req, moved, shares, mbt)
        notes.append(offload_note(s.cpu_offload_bytes, moved, p.tp * p.dp))
    return EngineReport(
        engine=NAME,
        budget_bytes=budget.requested,
        weights_bytes=shares[binding].weights_bytes,
        overheads=(*budget.overheads(act, non_torch, startup_holding(req)),
                   *([("EAGLE head's hidden-state buffer", head_buffer(req, mbt))]
                     if head_buffer(req, mbt) else []),
                   *([(lora_label(lora), adapters[binding])] if lora is not None else [])),
        kv_pool_bytes=budget.kv_bytes,
        kv_tokens=tokens * p.dp,
        blocks=num_blocks,
        block_tokens=main.min_block,
        max_concurrency=conc,
        max_sequences=max_seqs,
        max_context=max_ctx,
        fits=fits,
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=tuple(notes),
        binding_stage=binding,
        offload_tokens=offload_tokens,
        extra={"group_size": main.group_size, "groups": [g.kind.value for g in main.groups],
               "page_bytes": main.page, "weights": weights.format,
               "physical_tokens": num_blocks // max(1, len(main.groups)) * main.min_block,
               "in_flight_tokens": in_flight, "release": RELEASE, **extra},
    )

