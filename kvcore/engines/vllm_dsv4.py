"""vLLM's KV cache for DeepSeek-V4's compressed sparse attention (release 0.34.0).

Sources read (vllm-project/vllm, the v0.33.0 release package, ``vllm/_version.py`` commit
g4ba787ec9; the layouts below are unchanged in the v0.34.0 package, commit g62d4bc3c7, whose
extensible KV cache sizes the pool as vllm.rank_budget says):
``vllm/models/deepseek_v4/attention.py`` (DeepseekV4Attention: the compressed latent's
MLAAttentionSpec, the indexer's key cache, ``_resolve_dsv4_kv_cache_dtype``),
``vllm/models/deepseek_v4/compressor.py`` (CompressorStateCache: the compressor's float32 state
as a sliding-window spec of 4- or 8-token blocks), ``vllm/v1/attention/backends/mla/
sparse_swa.py`` (DeepseekV4SWACache: the 128-token window in 64-token blocks of 584-byte rows),
``vllm/models/deepseek_v4/sparse_mla.py`` (FLASHMLA_SPARSE_DSV4: blocks of 256, sm90/sm100, kv
dtypes auto/fp8/fp8_ds_mla), ``vllm/models/deepseek_v4/nvidia/model.py``
(``_select_dsv4_attn_cls``: FlashMLA except on sm12x), ``vllm/v1/kv_cache_interface.py`` (page =
states × row, rounded up to ``alignment``; window admission ``cdiv(min(W − 1 + in-flight, L),
block) + 1``), ``vllm/v1/core/kv_cache_planning.py`` (``_get_packed_kv_cache_groups``,
``_approximate_gcd``, ``_get_kv_cache_bytes_per_block``, ``get_kv_cache_configs``, the admission
check), ``vllm/v1/core/kv_cache_utils.py`` (``get_max_concurrency_for_kv_cache_config``,
``update_kv_cache_capacity``'s one log line), ``vllm/v1/attention/backends/utils.py``
(``resolve_kv_cache_layout``: the indexer backend alone declares layouts, BLHNC first, so blocks
are outermost), ``vllm/platforms/interface.py`` (``_preferred_block_size_for_backends``:
lcm(256, 32, 256, 1) = 256), ``vllm/config/vllm.py`` (``max_in_flight_tokens`` = (pp + 1) ×
max_num_batched_tokens with async scheduling on the V2 model runner),
``vllm/engine/arg_utils.py`` (``get_batch_defaults``).

Every layer keeps the window; a ratio-4 layer adds its compressed latent, the indexer's keys and
two compressor states; a ratio-128 layer its compressed latent and one compressor state. Layers
of one spec type and block size share a bucket; buckets become groups that share one pool of
block ids, each block id spanning the widest group's pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..model import LayerKind, ModelSpec
from ..parallel import stage_layers
from ..plan import MAX_SEQUENCES, largest
from .base import (
    EngineReport,
    EngineRequest,
    dsv4_geometry,
    need_gpu,
    rank_weights,
    single_format,
)
from .vllm import batch_tier, in_flight_tokens, serve_command, startup_lines

NAME = "vllm"
#: the release whose source this module follows
RELEASE = "0.34.0"
#: blocks of the compressed latent and indexer specs: the one size FLASHMLA_SPARSE_DSV4 and
#: DEEPSEEK_V4_INDEXER take ([256]) that the window (MultipleOf(32)) and compressor
#: (MultipleOf(1)) backends also take
BLOCK = 256
#: DeepseekV4SWACache's block (its constructor default; DeepseekV4Attention passes none)
SWA_BLOCK = 64
#: one token's fp8_ds_mla row: 448 fp8 NoPE values, 64 bf16 RoPE values, 7 UE8M0 scales and a
#: pad byte (state_content_bytes of the window and compressed specs)
ROW_BYTES = 448 + 64 * 2 + 448 // 64 + 1
#: fp8_ds_mla pages are rounded up to a multiple of 576 bytes (FlashMLA's alignment)
ALIGN = 576
#: the indexer key: fp8 values with one float32 scale per 128 (132 B for 128 values)
INDEX_QUANT_BLOCK = 128
#: CompressorStateCache: block 4 at ratio 4, 8 at ratio 128; float32 state
STATE_BLOCK = {4: 4, 128: 8}
STATE_BYTES = 4
#: kvplan format names vLLM takes for this model: "auto" and "fp8" both become fp8_ds_mla
FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8"}
ARCH = "DeepseekV4ForCausalLM"


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _ceil(a, b) * b


@dataclass(frozen=True)
class LayerSpec:
    """One layer's spec as vLLM's grouping sees it: its type, block, window and page."""

    what: str
    #: "full" (MLAAttentionSpec) or "sliding" (SlidingWindowMLASpec)
    kind: str
    block: int
    page: int
    window: int | None = None

    @property
    def bucket(self) -> tuple[str, int, int | None]:
        # UniformTypeKVCacheSpecs.is_uniform_type: one block size; full-attention specs go
        # together, sliding-window MLA specs only with the same window
        return (self.kind, self.block, self.window if self.kind == "sliding" else None)

    def blocks_per_request(self, max_len: int, in_flight: int) -> int:
        if self.kind == "full":
            return _ceil(max_len, self.block)
        assert self.window is not None
        return _ceil(min(self.window - 1 + in_flight, max_len), self.block) + 1


def _layers_by_kind(spec: ModelSpec, mtp: bool = False
                    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The layer numbers of the windows (every layer), the ratio-4 and the ratio-128 layers
    (``mtp``: the draft's next-n layers too, numbered after the decoder's)."""
    window: tuple[int, ...] = ()
    by_ratio: dict[int, tuple[int, ...]] = {4: (), 128: ()}
    for g in spec.groups_for(mtp=mtp):
        if g.kind is LayerKind.SLIDING:
            window = tuple(sorted(window + g.layers))
        elif g.kind is LayerKind.COMPRESSED and g.ratio in by_ratio:
            by_ratio[g.ratio] = tuple(sorted(by_ratio[g.ratio] + g.layers))
    return window, by_ratio[4], by_ratio[128]


def layer_specs(spec: ModelSpec, mtp: bool = False) -> list[tuple[LayerSpec, tuple[int, ...]]]:
    """Each kind of layer spec vLLM collects, with the layers that hold it, in layer order
    (every spec has max_tp_shards 1: each tensor-parallel rank holds all of them; ``mtp``:
    the MTP draft's layers, whose attention registers its caches beside the target's)."""
    _, _, _, latent, index_dim, window = dsv4_geometry(spec)
    windows, c4, c128 = _layers_by_kind(spec, mtp)
    out = [(LayerSpec("window", "sliding", SWA_BLOCK,
                      _round_up(SWA_BLOCK * ROW_BYTES, ALIGN), window), windows)]
    if c4:
        index_row = index_dim + index_dim // INDEX_QUANT_BLOCK * 4
        out += [
            (LayerSpec("c4 latent", "full", BLOCK,
                       _round_up(BLOCK // 4 * ROW_BYTES, ALIGN)), c4),
            (LayerSpec("c4 indexer", "full", BLOCK,
                       _round_up(BLOCK // 4 * index_row, ALIGN)), c4),
            # kv and score state of an overlapping compressor: 2 × 2 × width values a row,
            # a sliding window of 2 × 4 rows
            (LayerSpec("c4 state", "sliding", STATE_BLOCK[4],
                       _round_up(STATE_BLOCK[4] * 4 * latent * STATE_BYTES, ALIGN), 8), c4),
            (LayerSpec("c4 indexer state", "sliding", STATE_BLOCK[4],
                       _round_up(STATE_BLOCK[4] * 4 * index_dim * STATE_BYTES, ALIGN), 8), c4),
        ]
    if c128:
        out += [
            (LayerSpec("c128 latent", "full", BLOCK,
                       _round_up(BLOCK // 128 * ROW_BYTES, ALIGN)), c128),
            (LayerSpec("c128 state", "sliding", STATE_BLOCK[128],
                       _round_up(STATE_BLOCK[128] * 2 * latent * STATE_BYTES, ALIGN), 128),
             c128),
        ]
    return out


def approximate_gcd(values: list[int], lower: int) -> int:
    """kv_cache_planning._approximate_gcd: the d in [lower, max] that rounds the values up
    to multiples of d with the least padding, the larger d on a tie."""
    best, best_pad = lower, None
    for d in range(lower, max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


@dataclass(frozen=True)
class Group:
    """One KV cache group: its layers' specs (with the layers holding each) and what a block
    of it holds."""

    specs: tuple[tuple[LayerSpec, tuple[int, ...]], ...]

    @property
    def bytes(self) -> int:
        return sum(s.page * len(ls) for s, ls in self.specs)

    @property
    def layers(self) -> int:
        return sum(len(ls) for _, ls in self.specs)

    def blocks_per_request(self, max_len: int, in_flight: int) -> int:
        # UniformTypeKVCacheSpecs.max_memory_usage_pages: the most any of its layers needs
        return max(s.blocks_per_request(max_len, in_flight) for s, _ in self.specs)

    def project(self, own: range) -> Group:
        """_project_kv_cache_groups_to_worker: the group on a pipeline stage holding the
        layers ``own`` (no layer left: the group stays, with no bytes; the scheduler still
        gives a request its blocks)."""
        return Group(tuple((s, tuple(i for i in ls if i in own)) for s, ls in self.specs))


def groups(spec: ModelSpec, mtp: bool = False) -> list[Group]:
    """kv_cache_planning._get_packed_kv_cache_groups for this model's specs (no Mamba or
    circular-buffer specs; at least one bucket mixing page sizes in equal counts): a balanced
    bucket split into groups of whole pattern repeats, dealt round-robin in layer order."""
    buckets: dict[tuple[str, int, int | None], list[tuple[LayerSpec, tuple[int, ...]]]] = {}
    for s, ls in layer_specs(spec, mtp):
        buckets.setdefault(s.bucket, []).append((s, ls))
    info = []
    for members in buckets.values():
        by_page: dict[int, list[tuple[LayerSpec, tuple[int, ...]]]] = {}
        for s, ls in members:
            by_page.setdefault(s.page, []).append((s, ls))
        counts = {p: sum(len(ls) for _, ls in ms) for p, ms in by_page.items()}
        info.append((members, by_page, counts, len(set(counts.values())) == 1))
    floor = max((max(c.values()) for _, _, c, bal in info if bal and len(c) > 1), default=0)
    if not floor:
        raise InputError("kvplan does not model vllm's packing of DeepSeek-V4 without ratio-4 "
                         "layers (no bucket mixing page sizes: the state-bucket split is not "
                         "sized); --engine raw sizes the cache itself", field="engine")
    repeats = approximate_gcd([max(c.values()) for _, _, c, bal in info if bal], floor)
    out: list[Group] = []
    for members, by_page, counts, balanced in info:
        n_groups = _ceil(max(counts.values()), repeats) if balanced else 1
        if n_groups == 1:
            out.append(Group(tuple(members)))
            continue
        # a balanced bucket's layers, one of each page size a repeat, dealt round-robin
        assert all(len(ms) == 1 for ms in by_page.values())
        for i in range(n_groups):
            out.append(Group(tuple((ms[0][0], ms[0][1][i::n_groups])
                                   for ms in by_page.values())))
    return out


def bytes_per_block(gs: list[Group]) -> int:
    """_get_kv_cache_bytes_per_block, blocks outermost: the widest group's pages (no stride
    alignment beyond 1: the 256-token kernels match the 256-token block)."""
    return max(g.bytes for g in gs)


def _mtp_ratio(spec: ModelSpec) -> int:
    """The compress ratio of the MTP layer (0: its window alone)."""
    return next((g.ratio for g in spec.groups
                 if g.mtp and g.kind is LayerKind.COMPRESSED), 0)


def _mtp_caches(spec: ModelSpec) -> str:
    ratio = _mtp_ratio(spec)
    return {0: "a 128-token window", 4: "a window, a ratio-4 latent, indexer keys and their "
            "compressor states", 128: "a window, a ratio-128 latent and its compressor "
            "state"}[ratio]


def _refuse(what: str) -> InputError:
    return InputError(f"kvplan does not model vllm's DeepSeek-V4 cache with {what}; "
                      "--engine raw sizes the cache itself", field="engine")


def plan(req: EngineRequest) -> EngineReport:
    from .vllm import (
        NCCL,
        NON_TORCH,
        activation_peak,
        blocks_within,
        rank_budget,
    )

    s, opts, p = req.settings, req.cache, req.parallel
    k_name = single_format("vLLM", opts, FORMATS)
    if opts.hot_format is not None or opts.keep_fraction < 1:
        raise InputError("vLLM has no hot/cold mix or token eviction", field="engine")
    if req.spec.model_type != "deepseek_v4" or req.spec.architecture not in ("", ARCH):
        raise _refuse(f"model_type {req.spec.model_type} (its DeepSeek-V4 path reads the "
                      "deepseek_v4 config of DeepseekV4ForCausalLM)")
    if opts.mtp:
        # speculative_config method "mtp": the draft is the model's next-n layer(s)
        if not req.spec.mtp_layers:
            raise InputError(f"vLLM with --mtp: {req.spec.name} has no MTP / next-n layers in "
                             "its config for the draft", field="mtp")
        if req.spec.mtp_layers > 1:
            raise _refuse("a draft of several MTP modules (its windows retain speculative "
                          "tokens − 1 more)")
        if p.pp > 1:
            raise _refuse("MTP under pipeline parallelism (the draft's layer on the last "
                          "stage)")
    elif s.speculative_tokens:
        raise _refuse("speculative decoding without the model's MTP layer (--mtp)")
    if s.offload_bytes:
        raise _refuse("KV offload")
    if s.block_size not in (None, BLOCK):
        raise InputError(f"vLLM's DeepSeek-V4 kernels take blocks of {BLOCK} tokens; "
                         f"--block-size {s.block_size} is not sized", field="block_size")
    _, _, _, latent, index_dim, _ = dsv4_geometry(req.spec)
    if latent != 512 or index_dim not in (0, 128):
        raise _refuse(f"a latent of {latent} or an index key of {index_dim} values (its "
                      "kernels take 512 and 128)")
    # --data-parallel-size: an engine (and a cache) a DP rank, the routed experts split over
    # tp × dp ranks (FusedMoE flattens its TP group across DP)
    weights, shares = rank_weights(req, f32_as="bf16", expert_ranks=p.dp)
    for card in dict.fromkeys(sh.gpu for sh in shares if sh.gpu is not None):
        if card.cuda_family not in (9, 10):
            # FLASHMLA_SPARSE_DSV4 (supports_compute_capability 9, 10) keeps fp8_ds_mla rows;
            # sm12x runs the FlashInfer class with plain bf16/fp8 rows
            raise _refuse(f"the {card.name} (its fp8_ds_mla FlashMLA path runs on Hopper sm90 "
                          "and Blackwell sm100 cards)")
    gpu = shares[0].gpu if shares else None
    if gpu is None and req.kv_budget_bytes is None:
        raise need_gpu()
    # None: the extensible KV cache's 1.0 (vllm.rank_budget)
    util = s.gpu_memory_utilization
    # the card's default (engine/arg_utils.py get_batch_defaults: chunked prefill is on, so
    # max_model_len does not raise it); no card named (a KV budget alone): 8,192, the default
    # of the 70 to 160 GiB cards, as the other vLLM plans take it
    mbt = s.max_num_batched_tokens or batch_tier(gpu)
    # async scheduling on the V2 model runner (both defaults): pp + 1 batches in flight
    in_flight = in_flight_tokens(mbt, p.pp)
    act = activation_peak(req.spec, p.tp, mbt)
    non_torch = NON_TORCH + (NCCL if p.ranks_per_replica > 1 else 0)
    # the groups are the whole model's (get_global_kv_cache_groups); each pipeline stage holds
    # their projection onto its layers, its block the widest projected group, its blocks its
    # own budget's; every stage keeps the fewest (get_kv_cache_configs)
    gs = groups(req.spec, opts.mtp)
    stages = []
    for sh in shares:
        budget_s = rank_budget(sh.gpu.total_bytes if sh.gpu is not None else None, util,
                               sh.weights_bytes + non_torch, act, req.kv_budget_bytes,
                               s.extensible_kv_cache,
                               sh.gpu.usable_bytes if sh.gpu is not None else None)
        own = stage_layers(req.spec.decoder_layers, p.pp, sh.stage)
        per_block_s = bytes_per_block([g.project(own) for g in gs])
        blocks_s = max(0, budget_s.reserved) // per_block_s
        if budget_s.measured is not None:
            # the extensible cache's blocks after warmup: blocks outermost, one segment of
            # whole blocks in whole granules (extensible_kv_cache.py ExtensibleKVCache._segments)
            blocks_s = min(blocks_s, blocks_within(max(0, budget_s.measured), per_block_s,
                                                   [per_block_s]))
        stages.append((blocks_s, budget_s, per_block_s))
    binding = min(range(len(stages)), key=lambda i: stages[i][0])
    num_blocks, budget, per_block = stages[binding]
    sh = shares[binding]
    avail = min(b.kv_bytes for _, b, _ in stages)

    def per_request(length: int) -> int:
        return sum(g.blocks_per_request(length, in_flight) for g in gs)

    # the pool holds one null block back; vLLM's start-up check plans against the rest
    usable = max(0, num_blocks - 1)
    max_len = req.context
    conc = num_blocks / per_request(max_len)
    tokens = int(conc * max_len)
    fits = avail > 0 and usable >= per_request(max_len) * req.sequences
    max_ctx = largest(lambda n: n == 0 or usable >= per_request(n) * req.sequences, 1 << 31)
    max_seqs = min(MAX_SEQUENCES, usable // per_request(max_len))
    lines = startup_lines(budget.reserved, per_block, lambda n: per_request(n) * per_block,
                          max_len, tokens, conc,
                          num_blocks if budget.measured is not None else None, util,
                          [per_block])
    layout = ", ".join(f"{g.layers} layers of {g.bytes:,} B" for g in gs)
    notes = (
        f"vLLM {RELEASE}: DeepSeek-V4 runs an fp8_ds_mla cache ({ROW_BYTES}-byte rows, pages "
        f"rounded to {ALIGN} B) whatever the KV format named; {len(gs)} groups ({layout}) "
        f"share {num_blocks:,} blocks of {per_block:,} B",
        f"a request reserves {per_request(max_len):,} blocks: the windows and the compressor "
        f"states keep W − 1 + {in_flight:,} in-flight tokens ({p.pp + 1} × "
        f"--max-num-batched-tokens {mbt:,}); lower --max-num-batched-tokens to fit more",
    ) + (() if gpu is not None or s.max_num_batched_tokens else (
        "no card named: max_num_batched_tokens taken as 8,192 (vLLM's default on 70 to 160 GiB "
        "cards); give --gpu or --max-num-batched-tokens to match the server",)) + ((
        f"pipeline stages: each holds its layers' share of the groups (blocks of "
        f"{' / '.join(f'{b:,}' for _, _, b in stages)} B) from its own budget "
        f"({' / '.join(f'{n:,}' for n, _, _ in stages)} blocks); every stage keeps the "
        f"fewest, stage {binding}'s",) if p.pp > 1 else ()) + ((
        f"MTP draft ({s.speculative_tokens or 1} speculative token(s) a step): its next-n "
        "layer registers its own caches (compress ratio "
        f"{_mtp_ratio(req.spec)}: {_mtp_caches(req.spec)}) beside the target's, grouped with "
        "them; its weights load with the target's",) if opts.mtp else ())
    cmd = serve_command(req, max_len, util, k_name, mbt)
    return EngineReport(
        engine=NAME,
        budget_bytes=budget.requested,
        weights_bytes=sh.weights_bytes,
        overheads=budget.overheads(act, non_torch),
        kv_pool_bytes=avail,
        kv_tokens=tokens * p.dp,
        blocks=num_blocks,
        block_tokens=BLOCK,
        max_concurrency=conc,
        max_sequences=max_seqs,
        max_context=max_ctx,
        fits=fits,
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=notes,
        binding_stage=binding,
        extra={"bytes_per_block": per_block, "groups": [g.bytes for g in gs],
               "blocks_per_request": per_request(max_len), "in_flight_tokens": in_flight,
               "weights": weights.format, "release": RELEASE},
    )

