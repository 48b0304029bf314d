"""SGLang's pools for DeepSeek-V4's compressed sparse attention (DSV4PoolConfigurator).

Sources read (sglang 0.5.23, the release whose automatic fraction the plans use):
``sglang/srt/model_executor/pool_configurator.py`` (DSV4PoolConfigurator: bytes per sliding-window
slot and per full token, the fixed reserves, the pool split, the window pool's admission floor
and the three log lines); ``sglang/srt/mem_cache/deepseek_v4_memory_pool.py``
(get_compress_state_ring_size, collect_sources_by_ratio, select_dsv4_kv_layout,
get_dsv4_indexer_bytes_per_token); ``sglang/kernels/ops/attention/dsv4/kv_layout.py``
(KVLayout.V4: 576 data + 8 scale bytes a token, pages padded to 576 B);
``sglang/srt/arg_groups/model_overrides/deepseek_v4.py`` (page_size 256 on CUDA,
swa_full_tokens_ratio 0.1 declared for deepseek_v4, so the configurator takes it as the
operator's ratio and never enters its request-cap mode); ``sglang/srt/arg_groups/
deepseek_v4_hook.py`` (kv-cache dtype "auto" resolves to fp8_e4m3, max_running_requests 256
when unset, dsv4_attn_backend auto → flashmla for deepseek_v4); ``sglang/srt/environ.py``
(SGLANG_DSV4_KV_LAYOUT v4, SGLANG_DSV4_COMPRESS_STATE_DTYPE float32,
SGLANG_OPT_USE_ONLINE_COMPRESS off, SGLANG_HACK_FLASHMLA_BACKEND auto: no unified pool on CUDA).

Every pool is sized from one "full token" count F: the sliding-window pool holds 0.1·F tokens,
the ratio-4 pool F/4 entries, the ratio-128 pool F/128, the indexer F/4 keys, the ratio-4
compressor state 8 rows per 256-token page of the sliding pool. The ratio-128 compressor
state is per request (128 rows a request slot) and is taken off the budget first. Each paged
latent costs its page's padded bytes over the page's tokens: 585 B in 256-token window pages
and 64-entry ratio-4 pages, 864 B in the ratio-128 pool's 2-entry pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..model import ModelSpec
from ..plan import largest
from . import sglang_attn_dp as attn_dp
from .base import (
    EngineReport,
    EngineRequest,
    GiB,
    check_format,
    dsv4_geometry,
    rank_weights,
)
from .sglang import (
    PRELOAD,
    STAGE_SPLIT,
    Pools,
    fraction_depends_on_running,
    free_memory,
    kv_budget,
    launch_command,
    long_context_note,
    rule_note,
    short_pool_line,
    startup_error,
    startup_reason,
)
from .sglang_mtp import AUTO_DRAFT_TOKENS, Speculative
from .sglang_mtp import resolve as mtp_resolve

NAME = "sglang"
#: pages of 256 tokens (model_overrides/deepseek_v4.py; 128 on Ascend NPUs only)
PAGE_TOKENS = 256
#: swa_full_tokens_ratio DeepSeek-V4 gets when it is not given
SWA_RATIO = 0.1
#: compress-state ring rows per request slot (get_compress_state_ring_size: 8 for ratio 4, 128
#: for ratio 128; 16 and 256 with speculative decoding)
RING_C4, RING_C128 = 8, 128
RING_C4_SPEC, RING_C128_SPEC = 16, 256
#: bytes a compressor-state value takes (SGLANG_DSV4_COMPRESS_STATE_DTYPE float32)
STATE_BYTES = 4
#: the indexer's fp8 key with one float32 scale per 128 values
INDEX_QUANT_BLOCK = 128
#: kvplan format names SGLang takes for this model: "auto" resolves to fp8_e4m3 on CUDA and
#: the pool stores its own packed row whichever is named
FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8_e4m3"}
#: CUDA families whose cards the dsv4 backend decodes on (a custom card naming none is taken)
DSV4_FAMILIES = (9, 10, 12, None)
#: the unit KVLayout.V4 pads a page to (the FlashMLA reader's TMA row stride)
PAGE_ALIGN = 576


def row_bytes(latent: int, rope: int) -> int:
    """One token's packed latent (KVLayout.V4): the non-RoPE part in fp8, the RoPE part in
    bf16, one scale byte per 64 fp8 values and a pad byte: 448 + 128 + 8 = 584."""
    nope = latent - rope
    return nope + rope * 2 + nope // 64 + 1


def paged_bytes(page_tokens: int, row: int = 584) -> float:
    """Bytes a token costs in a pool of ``page_tokens``-row pages, each padded to PAGE_ALIGN
    (_get_paged_kv_bytes_per_token: layout.page_bytes(page) / page): 585.0 for 256 or 64
    rows, 864.0 for 2."""
    return -(-page_tokens * row // PAGE_ALIGN) * PAGE_ALIGN / page_tokens


@dataclass(frozen=True)
class Geometry:
    """What DSV4PoolConfigurator sizes from: the layers of a stage (all of them, of ratio 4,
    of ratio 128), the latent and index widths, and the compress-state rings and draft
    inflation of the run (``infl`` (layers + 1) / layers with an EAGLE draft, which the
    configurator reserves by pricing every token that much dearer)."""

    layers: int
    n4: int
    n128: int
    latent: int
    index_dim: int
    ring_c4: int
    ring_c128: int
    infl: float
    #: swa_full_tokens_ratio: the window pool's tokens a full token
    ratio: float = SWA_RATIO

    @classmethod
    def of(cls, spec: ModelSpec, sp: Speculative | None = None,
           ratio: float | None = None) -> Geometry:
        layers, n4, n128, latent, index_dim, _ = dsv4_geometry(spec)
        share = SWA_RATIO if ratio is None else ratio
        if sp is None:
            return cls(layers, n4, n128, latent, index_dim, RING_C4, RING_C128, 1.0, share)
        return cls(layers, n4, n128, latent, index_dim, RING_C4_SPEC, RING_C128_SPEC,
                   (layers + 1) / layers, share)

    def swa_slot_bytes(self) -> float:
        """_get_bytes_per_swa_token (before the draft inflation): a window slot's latent in
        every layer, and the ratio-4 compressor state (kv + score of 2·latent values and of
        2·index values, float32) priced per slot at the ring's rows a 256-token page."""
        state = 2 * 2 * self.latent * STATE_BYTES + 2 * 2 * self.index_dim * STATE_BYTES
        return (paged_bytes(PAGE_TOKENS) * self.layers
                + self.ring_c4 / PAGE_TOKENS * state * self.n4)

    def bytes_per_full_token(self) -> float:
        """DSV4PoolConfigurator._get_bytes_per_full_token, term by term in SGLang's order (a
        float: the token count is the budget divided by it, truncated): the window share of a
        window slot, then per ratio-4 layer a quarter latent and a quarter indexer key, per
        ratio-128 layer 1/128 latent; the draft inflation last."""
        indexer = self.index_dim + self.index_dim // INDEX_QUANT_BLOCK * 4
        compressed: list[float] = []
        if self.n4:
            compressed.append((1 / 4 * paged_bytes(PAGE_TOKENS // 4) + 1 / 4 * indexer)
                              * self.n4)
        if self.n128:
            compressed.append(1 / 128 * paged_bytes(PAGE_TOKENS // 128) * self.n128)
        # (× 1.0 without a draft leaves the float as it is)
        return (self.ratio * self.swa_slot_bytes() + sum(compressed)) * self.infl

    def c128_state_bytes(self, max_running: int) -> int:
        """The ratio-128 compressor state reserved before the token pools: (requests + 1)
        slots of a ring's rows, plus a ring and one row, rounded up to 128 rows, of kv and
        score rows (2 × latent float32 values) in every ratio-128 layer."""
        if not self.n128:
            return 0
        rows = (max_running + 1) * self.ring_c128 + self.ring_c128 + 1
        rows = -(-rows // 128) * 128
        return rows * 2 * self.latent * STATE_BYTES * self.n128

    def full_tokens(self, available: int, max_running: int) -> tuple[float, int, int]:
        """(bytes per full token, c128 state reserve, full tokens) for ``available`` bytes."""
        per_token = self.bytes_per_full_token()
        fixed = self.c128_state_bytes(max_running)
        full = int(max(available - fixed, 0) / per_token) // PAGE_TOKENS * PAGE_TOKENS
        return per_token, fixed, full

    def pool_sizes(self, full: int) -> dict[str, int]:
        """_compute_dsv4_sizes: every pool from the full token count."""
        swa = int(full * self.ratio) // PAGE_TOKENS * PAGE_TOKENS
        return {"full": full, "swa": swa, "c4": full // 4, "c128": full // 128,
                "c4_state": swa // PAGE_TOKENS * self.ring_c4, "c128_state": 0}


def _refuse(what: str) -> InputError:
    return InputError(f"kvplan does not model SGLang's DeepSeek-V4 pools with {what}; "
                      "--engine raw sizes the cache itself", field="engine")


def speculative(req: EngineRequest) -> Speculative | None:
    """The EAGLE run of a --mtp plan (None without it): SGLang's own 3 steps and 4 draft
    tokens, or --speculative-tokens; the ratio-4 ring of 16 rows keeps at most
    16 − 8 + 2 = 10 draft tokens resident (_assert_ring_serves_draft_tokens)."""
    if not req.cache.mtp:
        return mtp_resolve(req, sliding=False)
    draft = req.spec.mtp_layers
    if not draft:
        raise InputError(f"SGLang with --mtp: {req.spec.name} has no MTP / next-n layers in "
                         "its config for an EAGLE draft", field="mtp")
    tokens = req.settings.speculative_tokens or AUTO_DRAFT_TOKENS
    most = RING_C4_SPEC - 2 * 4 + 2
    if not 2 <= tokens <= most:
        raise InputError(f"SGLang's EAGLE for DeepSeek-V4 drafts steps + 1 tokens, and its "
                         f"ratio-4 compress-state ring keeps at most {most}: "
                         f"--speculative-tokens must be 2 to {most}", field="speculative_tokens")
    return Speculative(steps=tokens - 1, draft_tokens=tokens, cell_layers=1, draft_layers=draft)


def plan(req: EngineRequest) -> EngineReport:
    if not req.settings.radix_cache:
        raise _refuse("--disable-radix-cache (its window pool's prefix tails)")
    s, p, opts = req.settings, req.parallel, req.cache
    k_name = check_format("SGLang", opts.kv_k, FORMATS, "kv_k")
    check_format("SGLang", opts.kv_v, FORMATS, "kv_v")
    if opts.kv_k.name != opts.kv_v.name:
        raise InputError("SGLang stores K and V in one KV cache dtype; choose the same format "
                         "for both", field="kv_v")
    if p.pp > 1 and req.cache.mtp:
        raise InputError("SGLang with --mtp: the draft runs on the last pipeline stage only "
                         "(SGLANG_ENABLE_PP_SPEC); how the other stages' pools count it is not "
                         "sized: use --pp 1", field="mtp")
    if s.offload_bytes:
        raise _refuse("HiCache offload")
    if s.lora is not None:
        # (it planned the pools without the adapter buffers, which come off them)
        raise _refuse("--enable-lora (SGLang shapes a MoE model's LoRA buffers per model "
                      "class)")
    if s.page_size not in (None, PAGE_TOKENS):
        raise InputError(f"SGLang serves DeepSeek-V4 in pages of {PAGE_TOKENS} tokens; "
                         f"--page-size {s.page_size} is not taken", field="page_size")
    _, _, _, latent, _, window = dsv4_geometry(req.spec)
    if latent != 512 or window != 128:
        # the pool asserts the 448 + 64·2 + 8 = 584-byte row; the state ring is per 128 tokens
        raise _refuse(f"a latent of {latent} values or a window of {window} tokens (its pool "
                      "takes a 512-value latent and a 128-token window)")
    for gpu in dict.fromkeys(req.gpus):
        # the dsv4 backend decodes with FlashMLA's sparse kernels (sgl-flash-mla: SM90, SM100)
        # or its SM120 port; HIP builds a unified pool of its own
        if gpu.vendor not in ("nvidia", "custom") or gpu.cuda_family not in DSV4_FAMILIES:
            raise InputError(f"SGLang runs DeepSeek-V4's sparse attention with FlashMLA on "
                             f"Hopper (sm90) and Blackwell (sm100, sm120) cards; kvplan sizes "
                             f"its pools there, not on {gpu.name}", field="gpu")
    sp = speculative(req)
    weights, shares = rank_weights(req, STAGE_SPLIT)
    # --attn-dp-size: the heads' projections and the embedding over the attention group, a
    # pool of its own for each group's requests (sglang_attn_dp)
    tp_shares = shares
    shares = attn_dp.shares(req, weights, shares, STAGE_SPLIT)
    attn_more = max(a.weights_bytes - b.weights_bytes
                    for a, b in zip(shares, tp_shares, strict=True))
    groups, per = p.attn_dp, attn_dp.per_group(req)
    # each stage sizes its pools over its own slice of compress_ratios from the free memory
    # of the most loaded rank; the pipeline keeps the smallest full count
    # (_apply_token_constraints), every stage's pools sized again from it
    stages = [Geometry.of(sh.spec, sp, req.settings.swa_full_tokens_ratio) for sh in shares]
    budget_now = kv_budget(req, shares)
    rest, budget, frac = budget_now

    cap = s.max_total_tokens

    def sized(n: int) -> tuple[Pools, int, float, int]:
        """The pools with ``n`` running requests an attention group (--max-running-requests
        n × attn_dp: its c128 state reserve and, when SGLang picks the fraction itself, its
        decode-graph reserve), the binding stage, its
        bytes per full token and its c128 reserve. --max-total-tokens below the profiled
        count sizes every pool again from it, to the page (_apply_token_constraints,
        calculate_pool_sizes_from_max_tokens), the fixed reserves left as they were; the
        window pool's floor is checked on the profiled pools, then on the capped ones."""
        r, b, f = (kv_budget(req, shares, n * groups) if fraction_depends_on_running(req)
                   and n != per else budget_now)
        each = [g.full_tokens(r, n) for g in stages]
        at = min(range(len(each)), key=lambda i: each[i][2])
        per_token, fixed, full = each[at]
        swa = stages[at].pool_sizes(full)["swa"]
        tokens = full
        if cap is not None and cap < full and swa > window + PAGE_TOKENS:
            tokens = cap // PAGE_TOKENS * PAGE_TOKENS
            swa = stages[at].pool_sizes(tokens)["swa"]
        return Pools(r, r, b, f, tokens, swa, None, full), at, per_token, fixed

    def refusal(pl: Pools) -> str | None:
        """What SGLang raises at start-up with these pools (None: it starts)."""
        return startup_error(pl, per_req=0, per_running=1, window=window, page=PAGE_TOKENS,
                             weights_bytes=free_memory(req, shares)
                             if pl.budget is not None else None)

    pl, binding, per_token, fixed = sized(per)
    sizes = stages[binding].pool_sizes(pl.profiled)
    # the pools SGLang keeps: the profiled ones, or those a lower --max-total-tokens gives
    final = stages[binding].pool_sizes(pl.tokens)
    refused = refusal(pl)
    full = 0 if refused else pl.tokens

    def fits_len(length: int) -> bool:
        return length == 0 or full >= length * per

    def seqs_fit(n: int) -> bool:
        got = sized(n)[0]
        return n == 0 or (got.tokens >= n * req.context and refusal(got) is None)

    one = sized(1)[0]
    max_seqs = groups * largest(seqs_fit,
                                one.tokens // req.context if refusal(one) is None else 0)
    ratio = stages[0].ratio

    if refused:
        # it raises before the pools are built: nothing of theirs is logged
        lines = [refused]
    else:
        lines = [
            f"DSV4 SWA sizing: mode=ratio (explicit), swa_tokens={sizes['swa']}, "
            f"swa_full_tokens_ratio={ratio}",
            f"DSV4 memory calculation: unified=False, unified_fp8=False, "
            f"dspark_draft_bf16=False, bytes_per_full_token={per_token:.2f}, "
            f"available_bytes={rest / GiB:.2f} GB, c128_state_fixed={fixed / GiB:.2f} GB, "
            "c2_state_fixed=0.00 GB, swa_fixed=0.00 GB, swa_ring_fixed=0.00 GB, "
            f"c4_state_fixed=0.00 GB, full_token={pl.profiled}",
            "DSV4 pool sizes: " + ", ".join(f"{k}={v}" for k, v in sizes.items()),
        ]
        if cap is not None and cap > pl.profiled:
            lines.append(f"max_total_tokens={cap} is larger than the profiled value "
                         f"{pl.profiled}. Use the profiled value instead.")
        elif full != pl.profiled:
            lines += [f"DSV4 SWA sizing: mode=ratio (explicit), swa_tokens={final['swa']}, "
                      f"swa_full_tokens_ratio={ratio}",
                      "DSV4 pool sizes: " + ", ".join(f"{k}={v}" for k, v in final.items())]
        if p.pp > 1:
            # logged as the binding stage's configurator is built
            own = STAGE_SPLIT(req.spec.decoder_layers, p.pp, binding)
            lines.insert(0, f"DSV4 pool PP slice: rank={binding} layers=[{own.start},"
                            f"{own.stop}) local={len(own)}/{req.spec.decoder_layers}")
        if full < req.context:
            lines.append(short_pool_line(full, req.context))
    if frac is not None:
        lines.insert(0, f"mem_fraction_static={frac}")
    cmd = launch_command(req, k_name, frac)
    notes = [n for n in (rule_note(req, frac), long_context_note(req)) if n]
    if refused:
        notes.insert(0, f"SGLang refuses to start: {startup_reason(refused)}")
    notes.append(
        f"SGLang keeps DeepSeek-V4's latent as its own packed row ({row_bytes(latent, 64)} B: "
        f"fp8 + bf16 RoPE + scales, {paged_bytes(PAGE_TOKENS):g} B with the page padding) "
        "whatever the KV format named; the sliding-window pool holds "
        f"{pl.swa:,} tokens (swa_full_tokens_ratio {ratio}"
        + (", which SGLang sets for DeepSeek-V4)" if req.settings.swa_full_tokens_ratio is None
           else ")"))
    if not refused and full < pl.profiled:
        notes.append(f"--max-total-tokens {cap:,} sizes every pool again from {full:,} full "
                     f"tokens of the {pl.profiled:,} the budget holds (the c128 state reserve "
                     "stays as profiled)")
    if groups > 1:
        notes.append(attn_dp.note(req, attn_more, full, per))
    if sp is not None:
        cmd += sp.flags()
        notes.append(
            f"EAGLE with the model's MTP head: {sp.steps} steps, top-k 1, {sp.draft_tokens} "
            "draft tokens (--speculative-tokens sets them); SGLang reserves the draft worker's "
            f"pools by pricing a token {stages[0].layers + 1}/{stages[0].layers} as dear, and "
            f"its compress-state rings hold {RING_C4_SPEC} (ratio 4) and {RING_C128_SPEC} "
            "(ratio 128) rows a slot")
    return EngineReport(
        engine=NAME,
        budget_bytes=budget,
        weights_bytes=max(sh.weights_bytes for sh in shares),
        overheads=(("CUDA context before load", PRELOAD),),
        kv_pool_bytes=max(0, rest),
        # --dp: replicas (no DP attention), each with these pools and its own
        # --max-running-requests
        kv_tokens=full * groups * p.dp,
        blocks=full // PAGE_TOKENS,
        block_tokens=PAGE_TOKENS,
        max_concurrency=full * groups / max(1, req.context),
        max_sequences=max_seqs,
        max_context=largest(fits_len, 1 << 31),
        fits=refused is None and full >= req.context * per,
        refusal=startup_reason(refused) if refused else "",
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=tuple(notes),
        binding_stage=binding,
        extra={"mem_fraction_static": frac, "swa_tokens": pl.swa,
               "c128_state_bytes": fixed, "bytes_per_full_token": per_token,
               "pools": final, "weights": weights.format},
    )
