"""What every engine profile takes and returns.

An engine profile turns kvcore's exact arithmetic into the numbers one serving engine prints
and the flags it needs: its memory budget, what it reserves besides weights and cache, how it
pages the cache, and how it reports capacity. Budgets are per card; a plan over several cards
is the tightest card's answer (memory is never summed across cards).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InputError, shown
from ..formats import KVFormat
from ..gpus import GPU
from ..kv import CacheOptions, CacheSize, cache_size
from ..model import LayerKind, ModelSpec
from ..parallel import Parallel, Split, rank_spec, stage_layers
from ..plan import Workload
from ..weights import Weights, weights_for
from .llamacpp_lora import Adapter
from .lora import LoRA

__all__ = [
    "EngineReport",
    "EngineRequest",
    "EngineSettings",
    "RankShare",
    "UnsupportedFormat",
    "mib",
    "parallel_flags",
    "single_format",
]

GiB = 1024**3
MiB = 1024**2
#: n_cpu_moe for --cpu-moe: past any model's block count, so every block's experts
CPU_MOE = 1 << 16
#: most draft tokens per step a plan takes (speculative decoding proposes a handful)
MAX_SPECULATIVE_TOKENS = 64


class UnsupportedFormat(InputError):
    """The chosen KV format does not exist in this engine."""


#: a setting's name as the CLI and the API spell it, where it differs from EngineSettings'
SETTING_NAMES = {"lora": "enable_lora", "lora_adapters": "lora", "n_ubatch": "ubatch",
                 "flash_attn": "no_flash_attn", "offload_bytes": "offload",
                 "prefix_caching": "no_prefix_caching", "n_gpu_layers": "ngl",
                 "extensible_kv_cache": "no_extensible_kv_cache",
                 "extensible_kv_cache_asked": "enable_extensible_kv_cache",
                 "host_bandwidth_bytes_per_s": "host_bandwidth",
                 "host_memory_bytes": "host_memory", "host_link_bytes_per_s": "host_link",
                 "cpu_offload_bytes": "cpu_offload_gb", "cache_ram_mib": "cache_ram",
                 "fit_margin_bytes": "fit_target",
                 "decode_cuda_graph": "disable_decode_cuda_graph",
                 "prefill_cuda_graph": "disable_prefill_cuda_graph",
                 "dp_lm_head": "enable_dp_lm_head", "radix_cache": "disable_radix_cache"}


def parse_tensor_split(text: str) -> tuple[float, ...]:
    """llama.cpp's -ts: shares separated by commas (or slashes), "3,1"."""
    parts = [p.strip() for p in re.split(r"[,/]", str(text))]
    try:
        shares = tuple(float(p) for p in parts)
    except ValueError:
        raise InputError(f"tensor_split must be shares separated by commas (3,1), got "
                         f"{shown(text)}", field="tensor_split") from None
    return check_tensor_split(shares)


def check_tensor_split(shares: tuple[float, ...]) -> tuple[float, ...]:
    """-ts shares: 1 to 64 of them, each from 0 to a million, together at least 10⁻⁶."""
    if not 1 <= len(shares) <= 64 or not all(0 <= x <= 1e6 for x in shares) \
            or sum(shares) < 1e-6:
        raise InputError("tensor_split must be 1 to 64 shares from 0 to 1,000,000, not all 0 "
                         f"(3,1), got {shown(','.join(f'{x:g}' for x in shares))}",
                         field="tensor_split")
    return shares


@dataclass(frozen=True)
class EngineSettings:
    """Engine knobs. ``None`` means the engine's own default (documented per profile)."""

    # vLLM
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    speculative_tokens: int = 0
    #: V1's default; off (--no-enable-prefix-caching) a hybrid model's Mamba/GDN groups run
    #: mamba_cache_mode "none": one state page a request (and one per speculative token)
    prefix_caching: bool = True
    #: --enforce-eager: no CUDA graphs, so no graph memory set aside
    enforce_eager: bool = False
    #: vLLM 0.34's extensible KV cache (on by default on CUDA): the cache sized from the memory
    #: free after warmup, gpu_memory_utilization 1.0 unless given; off
    #: (--no-enable-extensible-kv-cache, or any release before 0.34) the 0.92 budget and its
    #: profiling estimate, as earlier releases sized it
    extensible_kv_cache: bool = True
    #: --enable-extensible-kv-cache given: asked for, so that vLLM stops at start-up where it
    #: cannot have it (Intel's XPU; a pool pinned by --kv-cache-memory-bytes) instead of
    #: leaving it off as its default does there
    extensible_kv_cache_asked: bool = False
    #: --language-model-only: every modality's limit 0, so the vision/audio towers are not
    #: built (their weights stay off the card) and the encoder is not profiled
    language_model_only: bool = False
    #: --enable-lora with its --max-loras, --max-lora-rank, --fully-sharded-loras and
    #: --lora-target-modules: the adapter slots every card allocates (None: LoRA off)
    lora: LoRA | None = None
    # llama.cpp
    n_ubatch: int | None = None
    swa_full: bool = False
    #: Ollama's OLLAMA_SCHED_SPREAD: the model over every card even where one would hold it
    sched_spread: bool = False
    kv_unified: bool | None = None
    flash_attn: bool | None = None
    #: --fit-target: bytes --fit leaves free on each card (None: 1,024 MiB)
    fit_margin_bytes: int | None = None
    #: -ngl: layers on the card, the output layer counted first (None: all, or --fit's choice)
    n_gpu_layers: int | None = None
    #: --n-cpu-moe: blocks (from the first) whose routed experts stay in host memory
    n_cpu_moe: int | None = None
    #: -ot PATTERN=CPU: the routed experts of the blocks the patterns match in host memory
    override_tensor: tuple[str, ...] = ()
    #: host memory's read bandwidth, for the part of a decode step the CPU computes
    host_bandwidth_bytes_per_s: float | None = None
    #: host memory llama.cpp may fill with the weights and caches it keeps there
    host_memory_bytes: int | None = None
    #: the link host-held weights cross to the card (PCIe) when the card computes with them
    host_link_bytes_per_s: float | None = None
    #: -ts: each card's share of the offloaded layers (None: an even split, or --fit's)
    tensor_split: tuple[float, ...] | None = None
    #: --cache-ram: MiB of host memory llama-server's prompt cache may hold (None: 8192; 0:
    #: none; -1: no byte limit)
    cache_ram_mib: int | None = None
    #: --ctx-checkpoints: context checkpoints a slot keeps in host memory (None: 32)
    ctx_checkpoints: int | None = None
    #: --lora: the LoRA adapters llama-server loads beside the model (their tensors)
    lora_adapters: tuple[Adapter, ...] = ()
    #: -ctkd/-ctvd: the draft model's cache type, K and V (None: f16, their default)
    draft_kv: str | None = None
    # SGLang
    mem_fraction_static: float | None = None
    page_size: int | None = None
    chunked_prefill_size: int | None = None
    #: --max-total-tokens: the most tokens the KV pool holds, below what the profile gives
    max_total_tokens: int | None = None
    #: --cuda-graph-max-bs-decode / -prefill: the largest batch (tokens) a CUDA graph is
    #: captured for (None: SGLang's default by card size, and the chunk)
    cuda_graph_max_bs_decode: int | None = None
    cuda_graph_max_bs_prefill: int | None = None
    #: False with --disable-decode-cuda-graph / --disable-prefill-cuda-graph (both with the
    #: older --disable-cuda-graph): no graph of that phase, none of its memory set aside
    decode_cuda_graph: bool = True
    prefill_cuda_graph: bool = True
    #: --enable-dp-lm-head: under attention DP the lm_head split over the attention group
    dp_lm_head: bool = False
    #: --moe-a2a-backend: "deepep" sets memory aside for DeepEP's buffers (None: none)
    moe_a2a_backend: str | None = None
    #: --swa-full-tokens-ratio: the sliding-window pool's tokens a full-layer token (None:
    #: SGLang's 0.8, DeepSeek-V4's 0.1)
    swa_full_tokens_ratio: float | None = None
    #: --mamba-full-memory-ratio: the Mamba state pool's share, ratio / (1 + ratio) of what
    #: the weights leave (None: 0.9); --max-mamba-cache-size: its slots as given instead
    mamba_full_memory_ratio: float | None = None
    max_mamba_cache_size: int | None = None
    #: False with --disable-radix-cache: a hybrid model's Mamba slots are one a running request
    radix_cache: bool = True
    #: --attention-backend: the backend SGLang runs (None: the one it picks itself, by model
    #: and card: sglang_page), which sets the page on SM100, and for trtllm_mha/trtllm_mla on
    #: any card; vLLM's AttentionConfig.backend (vllm_backends.forced: checked against the
    #: layers, the KV dtype and the cards; its kernels' preferred block)
    attention_backend: str | None = None
    #: --prefill-kv-cache-dequant-dtype with an nvfp4 cache: fp8_e4m3 (FlashInfer prefill over
    #: an fp8 copy) or nvfp4 (trtllm_mha prefill, SM100 only); None or auto: by the card
    prefill_kv_cache_dequant_dtype: str | None = None
    #: vLLM's --kv-cache-dtype-skip-layers: layer indices and sliding_window, comma-separated
    #: (the layers kept at the model's dtype beside a quantized cache: vllm_skip)
    kv_cache_dtype_skip_layers: str | None = None
    # TensorRT-LLM
    free_gpu_memory_fraction: float | None = None
    tokens_per_block: int | None = None
    #: --max_num_tokens: the tokens a forward pass takes (None: 8192), its activations' size
    max_num_tokens: int | None = None
    # CPU/disk tiers that hold KV beyond the GPU pool (bytes per rank)
    offload_bytes: int = 0
    #: vLLM --cpu-offload-gb: weights each rank keeps in pinned host memory (bytes)
    cpu_offload_bytes: int = 0

    def __post_init__(self) -> None:
        for name in ("gpu_memory_utilization", "mem_fraction_static", "free_gpu_memory_fraction",
                     "swa_full_tokens_ratio"):
            value = getattr(self, name)
            if value is not None and not (0.0 < value <= 1.0 and math.isfinite(value)):
                raise InputError(f"{name} must be in (0, 1], got {shown(value)}", field=name)
        for name in ("block_size", "max_num_batched_tokens", "max_num_seqs", "n_ubatch",
                     "page_size", "chunked_prefill_size", "tokens_per_block",
                     "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill", "max_num_tokens",
                     "max_mamba_cache_size"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= 1 << 24:
                shown_as = SETTING_NAMES.get(name, name)
                raise InputError(f"{shown_as} must be a whole number from 1 to {1 << 24:,}, got "
                                 f"{shown(value)}", field=shown_as)
        if self.max_total_tokens is not None and not 1 <= self.max_total_tokens <= 1 << 40:
            raise InputError(f"max_total_tokens must be a whole number from 1 to {1 << 40:,}, "
                             f"got {shown(self.max_total_tokens)}", field="max_total_tokens")
        if self.cache_ram_mib is not None and not -1 <= self.cache_ram_mib <= 1 << 30:
            raise InputError("cache_ram is MiB of host memory for llama-server's prompt cache, "
                             f"from -1 (no limit) and 0 (none) to {1 << 30:,}, got "
                             f"{shown(self.cache_ram_mib)}", field="cache_ram")
        if self.ctx_checkpoints is not None and not 0 <= self.ctx_checkpoints <= 1 << 16:
            raise InputError(f"ctx_checkpoints must be a whole number from 0 to {1 << 16:,}, "
                             f"got {shown(self.ctx_checkpoints)}", field="ctx_checkpoints")
        if self.mamba_full_memory_ratio is not None and not (
                0 < self.mamba_full_memory_ratio <= 100
                and math.isfinite(self.mamba_full_memory_ratio)):
            raise InputError("mamba_full_memory_ratio must be a ratio above 0 (Mamba state "
                             f"to KV bytes, 0.9), got {shown(self.mamba_full_memory_ratio)}",
                             field="mamba_full_memory_ratio")
        if self.prefill_kv_cache_dequant_dtype not in (None, "auto", "fp8_e4m3", "nvfp4"):
            raise InputError("prefill_kv_cache_dequant_dtype takes auto, fp8_e4m3 or nvfp4 "
                             "(SGLang's nvfp4 prefill input), got "
                             f"{shown(self.prefill_kv_cache_dequant_dtype)}",
                             field="prefill_kv_cache_dequant_dtype")
        if self.kv_cache_dtype_skip_layers is not None:
            from .vllm_skip import parse

            object.__setattr__(self, "kv_cache_dtype_skip_layers",
                               ",".join(parse(self.kv_cache_dtype_skip_layers)) or None)
        if self.moe_a2a_backend not in (None, "none", "deepep"):
            raise InputError(f"moe_a2a_backend: kvplan sizes SGLang's none and deepep (the "
                             f"memory its fraction sets aside for DeepEP); what "
                             f"{shown(self.moe_a2a_backend)} sets aside is not sized",
                             field="moe_a2a_backend")
        if not 0 <= self.speculative_tokens <= MAX_SPECULATIVE_TOKENS:
            raise InputError(f"speculative_tokens must be between 0 and {MAX_SPECULATIVE_TOKENS}, "
                             f"got {shown(self.speculative_tokens)}", field="speculative_tokens")
        if self.offload_bytes < 0:
            raise InputError("offload size must not be negative", field="offload")
        if not 0 <= self.cpu_offload_bytes <= 1 << 50:
            raise InputError("cpu_offload_gb must be from 0 to 1,048,576 GiB, got "
                             f"{shown(self.cpu_offload_bytes / 2**30)}", field="cpu_offload_gb")
        for name in ("n_gpu_layers", "n_cpu_moe"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1 << 16:
                shown_as = SETTING_NAMES.get(name, name)
                raise InputError(f"{shown_as} must be a whole number from 0 to {1 << 16:,}, got "
                                 f"{shown(value)}", field=shown_as)
        if self.host_memory_bytes is not None and self.host_memory_bytes <= 0:
            raise InputError("host_memory must be a positive size, got "
                             f"{shown(self.host_memory_bytes)}", field="host_memory")
        if self.tensor_split is not None:
            check_tensor_split(self.tensor_split)
        for name in ("host_bandwidth_bytes_per_s", "host_link_bytes_per_s"):
            bw = getattr(self, name)
            if bw is not None and not (1e9 <= bw <= 1e14 and math.isfinite(bw)):
                shown_as = SETTING_NAMES[name]
                raise InputError(f"{shown_as} must be from 1 to 100,000 GB/s, got "
                                 f"{shown(bw / 1e9)}", field=shown_as)


@dataclass(frozen=True)
class EngineRequest(Workload):
    #: one GPU per rank of a replica (TP × PP); one entry is repeated for all ranks
    gpus: tuple[GPU, ...] = ()
    parallel: Parallel = field(default_factory=Parallel)
    settings: EngineSettings = field(default_factory=EngineSettings)
    #: available KV memory per rank as the engine printed it: skip the budget arithmetic
    kv_budget_bytes: int | None = None
    #: weight bytes per rank as the engine printed them, instead of the estimate
    weights_bytes: int | None = None

    def gpu_for(self, rank: int) -> GPU | None:
        if not self.gpus:
            return None
        if len(self.gpus) == 1:
            return self.gpus[0]
        if len(self.gpus) != self.parallel.ranks_per_replica:
            raise InputError(f"give one GPU or {self.parallel.ranks_per_replica} GPUs (tp × pp), "
                             f"got {len(self.gpus)}", field="gpus")
        return self.gpus[rank]


@dataclass(frozen=True)
class RankShare:
    """What one rank (card) of one pipeline stage holds."""

    stage: int
    spec: ModelSpec
    weights_bytes: int
    gpu: GPU | None

    def cache(self, context: int, sequences: int, opts: CacheOptions) -> CacheSize:
        return cache_size(self.spec, context, sequences, opts)


@dataclass(frozen=True)
class EngineReport:
    """An engine's view of a plan, per rank of the tightest stage."""

    engine: str
    #: memory the engine lets itself use on the binding card (None with --kv-budget)
    budget_bytes: int | None
    weights_bytes: int
    #: named reservations besides weights and KV (activation peak, CUDA context, ...)
    overheads: tuple[tuple[str, int], ...]
    #: memory left for the KV cache on the binding card (the engine's "available KV")
    kv_pool_bytes: int
    #: tokens the engine reports it can cache
    kv_tokens: int
    #: blocks/pages/cells of the pool, when the engine pages it
    blocks: int | None
    block_tokens: int | None
    #: requests of `context` tokens that fit at once, in one replica (what the engine prints)
    max_concurrency: float
    #: the largest context per sequence that fits `sequences` sequences (0 if none)
    max_context: int
    fits: bool
    log_lines: tuple[str, ...]
    command: str
    notes: tuple[str, ...] = ()
    #: the stage that binds with several pipeline stages
    binding_stage: int = 0
    #: tokens held by offload tiers beyond the GPU pool
    offload_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: the most sequences of `context` tokens one replica serves, set up for that many (the
    #: largest ``sequences`` that fits; None: the whole part of ``max_concurrency``)
    max_sequences: int | None = None
    #: why the engine would not start with this plan, in a sentence ("" where it would)
    refusal: str = ""

    @property
    def sequences_max(self) -> int:
        return int(self.max_concurrency) if self.max_sequences is None else self.max_sequences


def mib(n: int | float) -> str:
    return f"{n / MiB:.2f}"


def shares(req: EngineRequest, weights: Weights, split: Split = stage_layers,
           input_on_cpu: bool = False, expert_ranks: int = 1) -> list[RankShare]:
    """Per pipeline stage: the rank's layers, heads and weight bytes (``split``: the layers of
    a stage; ``input_on_cpu``: the input embedding and any per-layer embedding table stay in
    host memory, as llama.cpp keeps them, and a tied lm_head is a copy of it on the last
    stage; ``expert_ranks``: the data-parallel ranks a stage's routed experts are split over
    besides tensor parallelism, as vLLM's FusedMoE flattens its TP group across DP)."""
    p = req.parallel
    n = req.spec.decoder_layers
    out = []
    # tensor parallelism splits everything but the replicated part (MLA down-projections,
    # router, norms), which every rank of a stage holds whole
    whole = weights.replicated_bytes if p.tp > 1 else 0
    # per-layer embedding tables (Gemma-3n, Gemma 4 E2B/E4B) sit with the input embedding:
    # on the first stage, split over tensor parallelism (vLLM's VocabParallelEmbedding), or
    # in host memory (llama.cpp's input layer)
    ple = weights.per_layer_embedding_bytes
    body = weights.bytes - weights.embedding_bytes - whole - ple
    head = weights.head_bytes
    for stage in range(p.pp):
        layers = len(split(n, p.pp, stage))
        w = body * layers // n
        if input_on_cpu:
            w += head if stage == p.pp - 1 else 0
        else:
            # the input embedding (the head's size) lives on the first stage, the lm_head on
            # the last: a tied one is the embedding itself on a single stage, a copy on several
            if stage == 0:
                w += weights.input_bytes + ple
            if stage == p.pp - 1 and (weights.lm_head_separate or p.pp > 1):
                w += head
        if expert_ranks > 1:
            experts = weights.expert_bytes * layers // n
            own = (w - experts) // p.tp + experts // (p.tp * expert_ranks)
        else:
            own = w // p.tp
        out.append(RankShare(stage, rank_spec(req.spec, p, stage, split),
                             own + whole * layers // n, req.gpu_for(stage * p.tp)))
    return out


def stage_part(total: int, req: EngineRequest, split: Split, stage: int) -> int:
    """The part of ``total`` bytes spread over the pipeline stages with the decoder's layers
    (as shares() spreads the body) that stage ``stage`` holds."""
    n = req.spec.decoder_layers
    return total * len(split(n, req.parallel.pp, stage)) // n


def encoder_bytes(req: EngineRequest) -> int:
    """The vision/audio towers' bytes among the weights the plan loads (0 without them)."""
    if not req.cache.encoder or not req.spec.params.encoder:
        return 0
    return (loaded_weights(req).bytes
            - loaded_weights(req, encoder=False).bytes)


def loaded_weights(req: EngineRequest, f32_as: str | None = None,
                   encoder: bool | None = None) -> Weights:
    """The weights an engine loads (``f32_as``: the format its ``--dtype auto`` loads a float32
    checkpoint in; ``encoder``: with the vision/audio towers, the request's choice if None)."""
    fmt = req.weights
    auto = fmt is None or str(fmt).lower() in ("auto", "")
    if (f32_as and auto and req.spec.dtype == "float32"
            and req.spec.checkpoint_weights is None):
        fmt = f32_as
    return weights_for(req.spec, fmt, mtp=req.cache.mtp,
                       include_encoder=req.cache.encoder if encoder is None else encoder)


def rank_weights(req: EngineRequest, split: Split = stage_layers,
                 input_on_cpu: bool = False, f32_as: str | None = None,
                 expert_ranks: int = 1) -> tuple[Weights, list[RankShare]]:
    """The weights and each stage's share of them (``split``, ``input_on_cpu`` and
    ``expert_ranks`` as shares takes them), refusing a KV budget that does not fit beside a
    share (check_budget). ``f32_as``: the format an engine's ``--dtype auto`` loads a float32
    checkpoint in."""
    weights = loaded_weights(req, f32_as)
    out = shares(req, weights, split, input_on_cpu, expert_ranks)
    if req.weights_bytes is not None:
        out = [replace(sh, weights_bytes=req.weights_bytes) for sh in out]
    check_budget(req, out)
    return weights, out


def check_budget(req: EngineRequest, parts: list[RankShare]) -> None:
    """A KV budget is what an engine printed on the named cards: it and a card's share of the
    weights (``parts``, as the engine places them) must fit in that card's memory, else no
    engine there can have printed it."""
    from ..units import format_bytes

    if req.kv_budget_bytes is None or not req.gpus:
        return
    for sh in parts:
        if sh.gpu is not None and req.kv_budget_bytes + sh.weights_bytes > sh.gpu.total_bytes:
            raise InputError(
                f"a KV budget of {format_bytes(req.kv_budget_bytes, 2)} beside "
                f"{format_bytes(sh.weights_bytes, 2)} of weights exceeds the "
                f"{sh.gpu.name}'s {format_bytes(sh.gpu.total_bytes, 2)}: give the budget an "
                "engine printed on this card", field="kv_budget")


def refuse_architecture(engine: str, spec: ModelSpec,
                        unsupported: dict[str, tuple[str, str]]) -> None:
    """Refuse, in one line, a model whose architecture ``engine`` cannot load.

    ``unsupported`` maps a Hugging Face ``model_type`` to (the architecture as the engine's
    registry names it, why and what runs it instead)."""
    entry = unsupported.get(spec.model_type)
    if entry is not None:
        arch, why = entry
        raise InputError(f"{engine} does not run {arch}: {why}",
                         field="engine")


def refuse_nas_layout(engine: str, spec: ModelSpec, *, mixed_heads: bool = True,
                      linear: bool = True, always: str | None = None) -> None:
    """Refuse, in one line, a Nemotron-NAS (DeciLM) model whose per-layer blocks ``engine``
    cannot run or whose cache layout for them is not established: ``always`` (the reason) for
    every such model; ``linear`` for attention replaced by a projection; ``mixed_heads`` for
    attention layers with different KV head counts."""
    if spec.model_type != "nemotron-nas":
        return
    if always is not None:
        raise InputError(f"{engine} does not size Nemotron-NAS (DeciLM) models: {always}; "
                         "plan it with vllm, llama.cpp or raw", field="engine")
    if linear and spec.linear_attention_layers:
        raise InputError(f"{engine} does not build Nemotron-NAS attention replaced by a linear "
                         f"projection (replace_with_linear, {spec.linear_attention_layers} "
                         "layers); llama.cpp runs it", field="engine")
    heads = {g.n_kv_heads for g in spec.groups if g.kind.is_attention}
    if mixed_heads and len(heads) > 1:
        raise InputError(f"{engine}'s cache for Nemotron-NAS attention layers with different KV "
                         f"head counts ({', '.join(map(str, sorted(heads)))}) is not "
                         "established; llama.cpp or raw sizes it", field="engine")


def refuse_layout(engine: str, spec: ModelSpec,
                  unknown: dict[str, str], by_architecture: dict[str, str] | None = None) -> None:
    """Refuse, in one line, a model whose cache layout in ``engine`` could not be established
    from the engine's source. ``unknown`` maps a ``model_type`` (``by_architecture`` a config
    architecture, checked first) to what is not established."""
    what = (by_architecture or {}).get(spec.architecture) or unknown.get(spec.model_type)
    if spec.cla_share_factor > 1:
        # HunYuan's cross-layer attention: vLLM builds the layers that reuse a leader's K/V as
        # encoder-decoder attention (hunyuan_v1.py), whose pages in a decoder-only model were
        # not traced; SGLang's, llama.cpp's and TensorRT-LLM's handling was not read
        what = (f"the cache of cross-layer attention (use_cla, cla_share_factor "
                f"{spec.cla_share_factor})")
    if what is not None:
        raise InputError(f"{engine}: kvplan could not establish {what} from the engine's "
                         "source, so it does not size this model there; choose another engine",
                         field="engine")


def need_gpu() -> InputError:
    """The error for a plan with neither a GPU nor a KV budget to size the pool from."""
    return InputError("give a GPU (--gpu) or an available KV budget (--kv-budget)", field="gpu")


def stage_pools(req: EngineRequest, shares: list[RankShare], reserved: int) -> list[int]:
    """Bytes each stage's cache may fill: the given KV budget, or the card's usable memory less
    the stage's weights and ``reserved``."""
    if req.kv_budget_bytes is not None:
        return [req.kv_budget_bytes] * len(shares)
    if any(sh.gpu is None for sh in shares):
        raise need_gpu()
    return [sh.gpu.usable_bytes - sh.weights_bytes - reserved for sh in shares if sh.gpu]


def check_format(engine: str, fmt: KVFormat, supported: dict[str, str], role: str) -> str:
    """The engine's own name for ``fmt``, or an UnsupportedFormat sentence."""
    name = supported.get(fmt.name)
    if name is None:
        raise UnsupportedFormat(
            f"{engine} has no {fmt.name} KV cache; its formats are "
            f"{', '.join(sorted(supported))}", field=role)
    return name


def single_format(engine: str, opts: CacheOptions, supported: dict[str, str]) -> str:
    """The engine's name for the one KV dtype it stores K and V in."""
    name = check_format(engine, opts.kv_k, supported, "kv_k")
    check_format(engine, opts.kv_v, supported, "kv_v")
    if opts.kv_k.name != opts.kv_v.name:
        raise InputError(f"{engine} stores K and V in one KV cache dtype; choose the same "
                         "format for both", field="kv_v")
    return name


def own_draft_format(req: EngineRequest, flag: str, allowed: tuple[str, ...],
                     what: str) -> KVFormat | None:
    """The draft's own KV dtype where the request gives one (kvplan's draft_kv, the engine's
    ``flag``; None: the target's, which the draft inherits), or a one-line refusal: without a
    draft, or a format outside ``allowed`` (``what`` says what the engine takes besides)."""
    from ..formats import get_format

    s = req.settings
    if s.draft_kv is None:
        return None
    if req.spec.draft is None or not req.cache.mtp:
        raise InputError(f"draft_kv is the draft's KV dtype ({flag}): give the draft too "
                         "(--draft)", field="draft_kv")
    fmt = get_format(s.draft_kv, field="draft_kv")
    if fmt.name not in allowed:
        raise InputError(f"{flag} is sized here for {', '.join(allowed)}{what}; got "
                         f"{fmt.name}", field="draft_kv")
    return fmt


def past_derived(engine: str, flag: str, context: int, derived: int | None,
                 variable: str) -> str | None:
    """Past the length an engine derives from the config (vLLM's max_model_len, SGLang's
    context length), its start-up raises a ValueError unless ``variable`` allows it: the note
    saying so (the plan's command sets the variable), else None."""
    if derived is None or context <= derived:
        return None
    return (f"{engine} refuses {flag} {context} above the {derived:,} it derives from the "
            f"config (a ValueError at start-up) unless {variable}=1, which the command sets")


def model_ref(spec: ModelSpec) -> str:
    """What a serving command loads: the Hub repo, else the local checkpoint folder a
    config.json was read from (a server loads the folder, not the folder's name), else the
    model's name."""
    import shlex
    from pathlib import Path

    if spec.hub_repo:
        return spec.hub_repo
    if spec.source.startswith("file "):
        path = Path(spec.source.removeprefix("file "))
        if path.name == "config.json":
            return shlex.quote(str(path.parent))
    return shlex.quote(spec.name)


def parallel_flags(p: Parallel, tp: str, pp: str, dp: str | None) -> list[str]:
    """Command-line flags for a parallel layout (only those above 1)."""
    flags = []
    for size, flag in ((p.tp, tp), (p.pp, pp), (p.dp, dp)):
        if size > 1 and flag:
            flags.append(f"{flag} {size}")
    return flags


def fp8_kv_checkpoint(spec: ModelSpec) -> bool:
    """Whether the checkpoint's ModelOpt quant config was calibrated for an FP8 KV cache
    (``kv_cache_quant_algo`` FP8, or an 8-bit float ``kv_cache_scheme``): vLLM's, SGLang's and
    TensorRT-LLM's automatic KV dtype then is fp8_e4m3."""
    return (spec.quant is not None and spec.quant.method == "modelopt"
            and spec.quant.kv_cache == "fp8")


def has_kind(spec: ModelSpec, *kinds: LayerKind) -> bool:
    return any(g.kind in kinds for g in spec.groups)


def kind_layers(spec: ModelSpec, kind: LayerKind) -> int:
    """The decoder's layers of ``kind`` (a draft's left out)."""
    return sum(g.count for g in spec.groups_for(mtp=False) if g.kind is kind)


def with_spec(req: EngineRequest, spec: ModelSpec) -> EngineRequest:
    return replace(req, spec=spec)


def dsv4_geometry(spec: ModelSpec) -> tuple[int, int, int, int, int, int]:
    """DeepSeek-V4's cache geometry: (layers, ratio-4 layers, ratio-128 layers, latent width,
    index width, window)."""
    groups = spec.groups_for()
    window = next(g for g in groups if g.kind is LayerKind.SLIDING)
    c4 = next((g for g in groups if g.kind is LayerKind.COMPRESSED and g.ratio == 4), None)
    c128 = next((g for g in groups if g.kind is LayerKind.COMPRESSED and g.ratio == 128), None)
    index = next((g for g in groups if g.kind is LayerKind.INDEX), None)
    return (window.count, c4.count if c4 else 0, c128.count if c128 else 0, window.head_dim_k,
            index.head_dim_k if index else 0, window.window or 0)
