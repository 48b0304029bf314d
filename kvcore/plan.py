"""The fit: weights + KV + state + runtime overhead against one card's memory.

This is the raw profile (physics, no engine rules): the answer to "how much memory does this
need", and the largest context / sequence count that fits. Not fitting is a result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import InputError
from .gpus import GPU
from .kv import (
    CacheOptions,
    CacheSize,
    GroupCache,
    bytes_per_token,
    cache_size,
    marginal_bytes_per_token,
)
from .model import LayerGroup, LayerKind, ModelSpec
from .units import MAX_CONTEXT_TOKENS
from .weights import Weights, weights_for

__all__ = ["Decode", "Overhead", "Plan", "PlanRequest", "Prefill", "Workload", "plan",
           "step_flops"]

#: CUDA context and library workspaces (cuBLAS, NCCL-less single card), bytes
CUDA_CONTEXT_BYTES = 512 * 1024**2
#: tokens per forward pass the compute buffers are sized for (llama.cpp's default n_ubatch)
UBATCH_TOKENS = 512
#: the most sequences kvplan searches for
MAX_SEQUENCES = 1_000_000


@dataclass(frozen=True)
class Overhead:
    """Memory that is neither weights nor cache: one line in every plan."""

    bytes: int
    detail: str


#: what the runtime's fixed reserve is called on each maker's cards (the bytes are the same
#: estimate: CUDA_CONTEXT_BYTES)
RUNTIME_NAMES = {"amd": "HIP runtime", "apple": "Metal runtime", "intel": "Level Zero runtime"}


def activation_width(spec: ModelSpec) -> int:
    """The activation values a token of a ubatch holds in a compute buffer: two hidden-size
    and two intermediate-size rows (the hidden size where the intermediate is narrower)."""
    return 2 * spec.hidden_size + 2 * max(spec.intermediate_size, spec.hidden_size)


def raw_overhead(spec: ModelSpec, vendor: str = "nvidia") -> Overhead:
    """The runtime's context (CUDA's on an NVIDIA card, named for the maker's runtime on
    others) + compute buffers for one ubatch (logits in f32, activations in f32)."""
    compute = UBATCH_TOKENS * (spec.vocab_size * 4 + activation_width(spec) * 4)
    runtime = RUNTIME_NAMES.get(vendor, "CUDA context")
    return Overhead(CUDA_CONTEXT_BYTES + compute,
                    f"{runtime} 512 MiB + compute buffers for {UBATCH_TOKENS}-token batches")


@dataclass(frozen=True)
class Workload:
    """What every question starts from: a model, a context, a number of sequences and the
    cache and weight formats. ``PlanRequest`` and the engine requests extend it."""

    spec: ModelSpec
    context: int
    sequences: int = 1
    cache: CacheOptions = field(default_factory=CacheOptions)
    #: weight format name; None = the checkpoint as published
    weights: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.context <= MAX_CONTEXT_TOKENS:
            raise InputError(f"context must be between 1 and {MAX_CONTEXT_TOKENS:,} tokens",
                             field="context")
        if not 1 <= self.sequences <= MAX_SEQUENCES:
            raise InputError(f"sequences must be between 1 and {MAX_SEQUENCES:,}",
                             field="sequences")


@dataclass(frozen=True)
class PlanRequest(Workload):
    gpu: GPU | None = None
    #: override the runtime overhead estimate (bytes)
    overhead_bytes: int | None = None


#: layer kinds whose decode step multiplies the query heads with cached entries (the indexer's
#: scores and the recurrent layers' state updates are not counted)
_ATTENDING = (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA,
              LayerKind.CROSS, LayerKind.COMPRESSED)


def attention_flops(spec: ModelSpec, cache: CacheSize, tp: int = 1) -> int:
    """FLOPs of one decode step's attention products on one of ``tp`` ranks (each holds
    1/tp of the query heads): 2 a query head a value of every entry read, for the scores
    (K's width) and the weighted sum (V's width; a latent layer's latent is read as both),
    in every layer that attends over a group's caches (GroupCache.layer_reads)."""
    total = 0
    for g, lg, heads in _attending(spec, cache):
        read = min(g.tokens, lg.read_limit) if lg.read_limit is not None else g.tokens
        width = lg.head_dim_k + (lg.head_dim_v or lg.head_dim_k)
        total += 2 * heads * width * read * cache.sequences
    return total // tp


def _attending(spec: ModelSpec, cache: CacheSize) -> list[tuple[GroupCache, LayerGroup, int]]:
    """The groups of ``cache`` whose layers attend over entries they hold, with their
    geometry and the query heads that read them, summed over the layers: each layer's own,
    and as many again for each layer that reads its cache (GroupCache.rereads, at the group's
    mean)."""
    out = []
    for g in cache.groups:
        lg = g.group
        if lg.kind not in _ATTENDING or not g.tokens:
            continue
        own = sum(spec.q_heads(i) for i in lg.layers)
        out.append((g, lg, own * g.layer_reads // lg.count))
    return out


def _causal_pairs(n: int, limit: int | None = None) -> int:
    """(query, entry) pairs a causal prefill of ``n`` tokens scores: token i (from 1) attends
    to its i latest entries, at most ``limit`` of them."""
    if limit is None or n <= limit:
        return n * (n + 1) // 2
    return limit * (limit + 1) // 2 + (n - limit) * limit


def prefill_attention_flops(spec: ModelSpec, cache: CacheSize, tp: int = 1) -> int:
    """FLOPs of the attention products of a prefill of ``cache.context`` tokens in each of
    ``cache.sequences`` sequences, on one of ``tp`` ranks: 2 a query head a value of every
    (query, entry) pair the causal mask keeps (a sliding layer's window, a chunked layer's
    chunk, a sparse layer's top-k, every encoder token of a cross-attention layer), for the
    scores and the weighted sum. An MLA layer computes its heads unabsorbed
    (qk_nope + qk_rope and v_head_dim wide) where the config gives them. The indexer's scores
    and the recurrent layers' state updates are not counted."""
    n = cache.context
    total = 0
    for g, lg, heads in _attending(spec, cache):
        if lg.kind is LayerKind.SLIDING:
            pairs = _causal_pairs(n, lg.window)
        elif lg.kind is LayerKind.CHUNKED and lg.window:
            whole, rest = divmod(n, lg.window)
            pairs = whole * _causal_pairs(lg.window) + _causal_pairs(rest)
        elif lg.kind is LayerKind.CROSS:
            pairs = n * g.tokens
        else:
            pairs = lg.ratio * _causal_pairs(n // lg.ratio, lg.read_limit)
        if lg.kind is LayerKind.MLA and spec.mla_qk_head_dim and spec.mla_v_head_dim:
            width = spec.mla_qk_head_dim + spec.mla_v_head_dim
        else:
            width = lg.head_dim_k + (lg.head_dim_v or lg.head_dim_k)
        total += 2 * heads * width * pairs * cache.sequences
    return total // tp


def step_flops(spec: ModelSpec, cache: CacheSize) -> int:
    """FLOPs of one decode step of ``cache.sequences`` sequences (a token each): 2 a weight
    read by a token (the active parameters: a mixture of experts computes only the experts a
    token routes to) and the attention products (attention_flops)."""
    return 2 * spec.params.active * cache.sequences + attention_flops(spec, cache)


@dataclass(frozen=True)
class Decode:
    """Decode estimate at full context, bound by the card's bandwidth or, where the catalog
    gives its matrix peak, its compute, whichever takes longer: every step reads the active
    weights (of a mixture of experts, the experts any of the step's tokens routes to:
    Weights.step_bytes) and the cache of every sequence (all of it, but only the selected
    top-k entries of a sparse-attention layer), and reads and writes the recurrent state;
    it computes step_flops."""

    bytes_per_step: int
    seconds_per_step: float
    tokens_per_s_per_sequence: float
    tokens_per_s_total: float
    kv_share: float
    #: a sparse-attention layer reads only its top-k entries (less than the cache it holds)
    sparse: bool = False
    #: share of the routed experts' bytes a step reads (None: no routed experts)
    expert_share: float | None = None
    #: FLOPs of a step's matrix products (step_flops)
    flops_per_step: int = 0
    #: the step's bytes at the card's bandwidth, and its FLOPs at the card's dense FP16/BF16
    #: matrix peak (None where the catalog has no figure); seconds_per_step is the larger
    bandwidth_seconds: float = 0.0
    compute_seconds: float | None = None

    @property
    def bound(self) -> str:
        """"compute" where the FLOPs at the card's peak take longer than the bytes at its
        bandwidth, else "bandwidth"."""
        return ("compute" if self.compute_seconds is not None
                and self.compute_seconds > self.bandwidth_seconds else "bandwidth")


@dataclass(frozen=True)
class Prefill:
    """The prompt of one sequence, ``tokens`` long, at the card's dense FP16/BF16 matrix
    peak: 2 FLOPs a weight a token (the lm_head's for the last token only) and the causal
    attention's products (prefill_attention_flops), or the weights read once at its
    bandwidth where that takes longer. A ceiling, as the decode estimate: real GEMMs reach
    part of the peak."""

    tokens: int
    flops: int
    attention_flops: int
    seconds: float
    #: "compute", or "bandwidth" where reading the weights once takes longer (a short prompt)
    bound: str = "compute"

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


def prefill_estimate(spec: ModelSpec, opts: CacheOptions, context: int, weights: Weights,
                     gpu: GPU) -> Prefill | None:
    """Prefill of one ``context``-token prompt on ``gpu`` (None where the catalog gives no
    matrix peak, or there is no prompt)."""
    if not gpu.matmul_flops_per_s or not gpu.bandwidth_bytes_per_s or context < 1:
        return None
    attention = prefill_attention_flops(spec, cache_size(spec, context, 1, opts))
    # the lm_head runs on the last token only: a prefill's logits are the next token's
    head = spec.vocab_size * spec.hidden_size
    flops = 2 * (spec.params.active - head) * context + 2 * head + attention
    compute = flops / gpu.matmul_flops_per_s
    memory = weights.bytes / gpu.bandwidth_bytes_per_s
    return Prefill(context, flops, attention, max(compute, memory),
                   "compute" if compute >= memory else "bandwidth")


@dataclass(frozen=True)
class Plan:
    request: PlanRequest
    cache: CacheSize
    weights: Weights
    overhead: Overhead
    bytes_per_token: int
    marginal_bytes_per_token: int
    #: memory the plan may use (None without a GPU)
    budget_bytes: int | None = None
    fits: bool | None = None
    max_context: int | None = None
    max_sequences: int | None = None
    binding: str | None = None
    binding_reason: str = ""
    decode: Decode | None = None
    prefill: Prefill | None = None

    @property
    def kv_bytes(self) -> int:
        return self.cache.kv_bytes

    @property
    def state_bytes(self) -> int:
        return self.cache.state_bytes

    @property
    def total_bytes(self) -> int:
        return self.weights.bytes + self.cache.total_bytes + self.overhead.bytes


def _total(req: PlanRequest, weights: Weights, overhead: Overhead, context: int,
           sequences: int) -> int:
    return weights.bytes + overhead.bytes + cache_size(req.spec, context, sequences,
                                                       req.cache).total_bytes


def largest(fits: Callable[[int], bool], hi: int) -> int:
    """Largest n in [0, hi] with fits(n) (fits monotone, fits(0) assumed true)."""
    if fits(hi):
        return hi
    lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def max_context(req: PlanRequest, weights: Weights, overhead: Overhead, budget: int) -> int:
    """Largest context per sequence that fits (0 if not even one token does)."""
    def fits(n: int) -> bool:
        return _total(req, weights, overhead, n, req.sequences) <= budget

    return largest(lambda n: n == 0 or fits(n), MAX_CONTEXT_TOKENS)


def max_sequences(req: PlanRequest, weights: Weights, overhead: Overhead, budget: int) -> int:
    """Most sequences of the requested context that fit (0 if not one)."""
    base = weights.bytes + overhead.bytes + cache_size(req.spec, req.context, 0, req.cache).total_bytes
    one = cache_size(req.spec, req.context, 1, req.cache).total_bytes - \
        cache_size(req.spec, req.context, 0, req.cache).total_bytes
    if base > budget:
        return 0
    if one <= 0:
        return MAX_SEQUENCES
    return min(MAX_SEQUENCES, (budget - base) // one)


def plan(req: PlanRequest) -> Plan:
    spec, opts = req.spec, req.cache
    cache = cache_size(spec, req.context, req.sequences, opts)
    weights = weights_for(spec, req.weights, mtp=opts.mtp, include_encoder=opts.encoder)
    overhead = (Overhead(req.overhead_bytes, "given") if req.overhead_bytes is not None
                else raw_overhead(spec, req.gpu.vendor if req.gpu is not None else "nvidia"))
    per_token = bytes_per_token(spec, opts)
    marginal = marginal_bytes_per_token(spec, opts)
    result = Plan(req, cache, weights, overhead, per_token, marginal)
    if req.gpu is None:
        return result
    budget = req.gpu.usable_bytes
    total = result.total_bytes
    fits = total <= budget
    ctx = max_context(req, weights, overhead, budget)
    seqs = max_sequences(req, weights, overhead, budget)
    if weights.bytes + overhead.bytes > budget:
        binding, reason = "weights", "the weights and runtime alone exceed the card"
    elif weights.bytes + overhead.bytes + cache_size(spec, 1, req.sequences, opts).total_bytes > budget:
        binding, reason = "state", "the per-sequence state leaves no room for the KV cache"
    elif not fits:
        binding, reason = "kv", "the KV cache for this context and sequence count exceeds what is left"
    else:
        terms = {"weights": weights.bytes, "kv": cache.kv_bytes, "state": cache.state_bytes,
                 "overhead": overhead.bytes}
        binding = max(terms, key=terms.__getitem__)
        reason = f"{binding} is the largest share of the card"
    decode = None
    if req.gpu.bandwidth_bytes_per_s:
        step = weights.step_bytes(req.sequences) + cache.read_bytes + 2 * cache.state_bytes
        memory = step / req.gpu.bandwidth_bytes_per_s
        flops = step_flops(spec, cache)
        compute = flops / req.gpu.matmul_flops_per_s if req.gpu.matmul_flops_per_s else None
        seconds = max(memory, compute or 0.0)
        decode = Decode(step, seconds, 1 / seconds, req.sequences / seconds,
                        (cache.read_bytes + 2 * cache.state_bytes) / step,
                        cache.read_bytes < cache.kv_bytes,
                        weights.expert_share(req.sequences), flops, memory, compute)
    prefill = prefill_estimate(spec, opts, req.context, weights, req.gpu)
    return Plan(req, cache, weights, overhead, per_token, marginal, budget, fits, ctx, seqs, binding,
                reason, decode, prefill)
