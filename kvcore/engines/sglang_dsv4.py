"""SGLang's pools for DeepSeek-V4's compressed sparse attention (DSV4PoolConfigurator).

Sources read (sgl-project/sglang): ``python/sglang/srt/model_executor/pool_configurator.py``
(DSV4PoolConfigurator: bytes per full token, the c128 state reserve, the pool split and its two
log lines) @003fca8027387a3d6565b2c08e497e3020ac6211;
``python/sglang/srt/mem_cache/deepseek_v4_memory_pool.py`` (the 584-byte packed row, the
compress-state ring sizes) @007bddd4a95b44d3c8cd22c8a24d0ee1455955fd;
``python/sglang/srt/arg_groups/model_overrides/deepseek_v4.py`` (page_size 256 on CUDA,
swa_full_tokens_ratio 0.1) @01a4a991568f810ca3a10984e2881e136212c916;
``python/sglang/srt/arg_groups/deepseek_v4_hook.py`` (kv-cache dtype "auto" resolves to
fp8_e4m3, max_running_requests 256 when unset) @006cbb6607dd5ddf92c316198a55a06a486704c8;
``python/sglang/srt/environ.py`` (SGLANG_DSV4_COMPRESS_STATE_DTYPE float32,
SGLANG_OPT_USE_ONLINE_COMPRESS off).

Every pool is sized from one "full token" count F: the sliding-window pool holds 0.1·F tokens,
the ratio-4 pool F/4 entries, the ratio-128 pool F/128, the indexer F/4 keys, the ratio-4
compressor state 8 rows per 128-token window page of the sliding pool. The ratio-128
compressor state is per request (128 rows a request slot) and is taken off the budget first.
"""

from __future__ import annotations

from ..errors import InputError
from ..model import ModelSpec
from ..plan import largest
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
    fraction_depends_on_running,
    kv_budget,
    launch_command,
    long_context_note,
    rule_note,
)

NAME = "sglang"
#: pages of 256 tokens (model_overrides/deepseek_v4.py; 128 on Ascend NPUs only)
PAGE_TOKENS = 256
#: swa_full_tokens_ratio DeepSeek-V4 gets when it is not given
SWA_RATIO = 0.1
#: compress-state ring rows per sequence without speculative decoding
#: (get_compress_state_ring_size: 8 for ratio 4, 128 for ratio 128)
RING_C4, RING_C128 = 8, 128
#: bytes a compressor-state value takes (SGLANG_DSV4_COMPRESS_STATE_DTYPE float32)
STATE_BYTES = 4
#: the indexer's fp8 key with one float32 scale per 128 values
INDEX_QUANT_BLOCK = 128
#: kvplan format names SGLang takes for this model: "auto" resolves to fp8_e4m3 on CUDA and
#: the pool stores its own packed row whichever is named
FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8_e4m3"}


#: the plan's note on releases: its fraction is SGLang 0.5.23's, its pools an earlier commit's
RELEASE_NOTE = ("these DeepSeek-V4 pools follow DSV4PoolConfigurator as of @003fca8 (bytes per "
                "full token and the c128 state reserve); SGLang 0.5.23's also sets aside c2 "
                "and c4 compress states, a fixed sliding-window share and a sliding-window ring "
                "a request slot before it sizes the full pool, and logs more fields: not "
                "re-read here, so under 0.5.23 the full pool can be smaller than planned")


def row_bytes(latent: int, rope: int) -> int:
    """One token's packed latent (DeepSeekV4SingleKVPool): the non-RoPE part in fp8, the
    RoPE part in bf16, one scale byte per 64 fp8 values and a pad byte: 448 + 128 + 8 = 584."""
    nope = latent - rope
    return nope + rope * 2 + nope // 64 + 1


def bytes_per_full_token(spec: ModelSpec, rope: int = 64) -> float:
    """DSV4PoolConfigurator._get_bytes_per_full_token, term by term in SGLang's order (a
    float: the token count is the budget divided by it, truncated)."""
    layers, n4, n128, latent, index_dim, window = dsv4_geometry(spec)
    kv = row_bytes(latent, rope)
    indexer = index_dim + index_dim // INDEX_QUANT_BLOCK * 4
    c4_state = 2 * 2 * latent * STATE_BYTES
    c4_index_state = 2 * 2 * index_dim * STATE_BYTES
    c4_state_ratio = RING_C4 / window
    return (SWA_RATIO * kv * layers
            + 1 / 4 * kv * n4
            + 1 / 128 * kv * n128
            + 1 / 4 * indexer * n4
            + SWA_RATIO * c4_state_ratio * c4_state * n4
            + SWA_RATIO * c4_state_ratio * c4_index_state * n4)


def c128_state_bytes(spec: ModelSpec, max_running: int) -> int:
    """The ratio-128 compressor state reserved before the token pools: (requests + 1) slots
    of 128 rows, plus a ring and one row, rounded up to 128 rows, of kv and score rows
    (2 × latent float32 values) in every ratio-128 layer."""
    _, _, n128, latent, _, _ = dsv4_geometry(spec)
    if not n128:
        return 0
    rows = (max_running + 1) * RING_C128 + RING_C128 + 1
    rows = -(-rows // 128) * 128
    return rows * 2 * latent * STATE_BYTES * n128


def pool_sizes(spec: ModelSpec, available: int, max_running: int
               ) -> tuple[float, int, dict[str, int]]:
    """(bytes per full token, c128 state reserve, pool sizes) for ``available`` bytes."""
    per_token = bytes_per_full_token(spec)
    fixed = c128_state_bytes(spec, max_running)
    full = int(max(available - fixed, 0) / per_token) // PAGE_TOKENS * PAGE_TOKENS
    swa = int(full * SWA_RATIO) // PAGE_TOKENS * PAGE_TOKENS
    window = dsv4_geometry(spec)[5]
    sizes = {"full": full, "swa": swa, "c4": full // 4, "c128": full // 128,
             "c4_state": swa // window * RING_C4, "c128_state": 0}
    return per_token, fixed, sizes


def _refuse(what: str) -> InputError:
    return InputError(f"kvplan does not model SGLang's DeepSeek-V4 pools with {what}; "
                      "--engine raw sizes the cache itself", field="engine")


def plan(req: EngineRequest) -> EngineReport:
    s, p, opts = req.settings, req.parallel, req.cache
    k_name = check_format("SGLang", opts.kv_k, FORMATS, "kv_k")
    check_format("SGLang", opts.kv_v, FORMATS, "kv_v")
    if opts.kv_k.name != opts.kv_v.name:
        raise InputError("SGLang stores K and V in one KV cache dtype; choose the same format "
                         "for both", field="kv_v")
    if p.pp > 1:
        raise _refuse("pipeline parallelism (per-stage slices of compress_ratios)")
    if p.dp > 1:
        raise _refuse("data parallelism (max_running_requests per DP worker)")
    if s.speculative_tokens:
        raise _refuse("speculative decoding (rings of 16 and 256 rows, a draft share)")
    if s.offload_bytes:
        raise _refuse("HiCache offload")
    if s.max_total_tokens is not None:
        raise _refuse("--max-total-tokens (the compressed pools sized again from a cap)")
    if s.page_size not in (None, PAGE_TOKENS):
        raise InputError(f"SGLang serves DeepSeek-V4 in pages of {PAGE_TOKENS} tokens; "
                         f"--page-size {s.page_size} is not taken", field="page_size")
    _, _, _, latent, _, window = dsv4_geometry(req.spec)
    if latent != 512 or window != 128:
        # the pool asserts the 448 + 64·2 + 8 = 584-byte row; the state ring is per 128 tokens
        raise _refuse(f"a latent of {latent} values or a window of {window} tokens (its pool "
                      "takes a 512-value latent and a 128-token window)")
    weights, shares = rank_weights(req, STAGE_SPLIT)
    rest, budget, frac = kv_budget(req, shares)
    # kvplan's command passes --max-running-requests, which sizes the c128 state reserve
    per_token, fixed, sizes = pool_sizes(req.spec, rest, req.sequences)
    full = sizes["full"]

    def fits_len(length: int) -> bool:
        return length == 0 or full >= length * req.sequences

    def seqs_fit(n: int) -> bool:
        # --max-running-requests n sizes the c128 state reserve and, when SGLang picks the
        # fraction itself, its decode-graph reserve: the pool each count would get
        avail = kv_budget(req, shares, n)[0] if fraction_depends_on_running(req) else rest
        return n == 0 or pool_sizes(req.spec, avail, n)[2]["full"] >= n * req.context

    one = kv_budget(req, shares, 1)[0] if fraction_depends_on_running(req) else rest
    max_seqs = largest(seqs_fit, pool_sizes(req.spec, one, 1)[2]["full"] // req.context)

    lines = [
        f"DSV4 memory calculation: bytes_per_full_token={per_token:.2f}, "
        f"available_bytes={rest / GiB:.2f} GB, c128_state_fixed={fixed / GiB:.2f} GB, "
        f"full_token={full}",
        "DSV4 pool sizes: " + ", ".join(f"{k}={v}" for k, v in sizes.items()),
    ]
    if frac is not None:
        lines.insert(0, f"mem_fraction_static={frac}")
    cmd = launch_command(req, k_name, frac)
    rule = rule_note(req, frac)
    long = long_context_note(req)
    notes = (*((rule,) if rule else ()), *((long,) if long else ()),
             f"SGLang keeps DeepSeek-V4's latent as its own packed row ({row_bytes(dsv4_geometry(req.spec)[3], 64)} B: fp8 + bf16 RoPE + scales) "
             "whatever the KV format named; the sliding-window pool holds "
             f"{sizes['swa']:,} tokens (swa_full_tokens_ratio {SWA_RATIO})",
             RELEASE_NOTE)
    return EngineReport(
        engine=NAME,
        budget_bytes=budget,
        weights_bytes=max(sh.weights_bytes for sh in shares),
        overheads=(("CUDA context before load", PRELOAD),),
        kv_pool_bytes=max(0, rest),
        kv_tokens=full,
        blocks=full // PAGE_TOKENS,
        block_tokens=PAGE_TOKENS,
        max_concurrency=full / max(1, req.context),
        max_sequences=max_seqs,
        max_context=largest(fits_len, 1 << 31),
        fits=full >= req.context * req.sequences,
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=notes,
        extra={"mem_fraction_static": frac, "swa_tokens": sizes["swa"],
               "c128_state_bytes": fixed, "bytes_per_full_token": per_token,
               "pools": sizes, "weights": weights.format},
    )
