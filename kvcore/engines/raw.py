"""The raw profile over any parallel layout: weights + exact cache + runtime estimate, per card."""

from __future__ import annotations

from ..plan import MAX_SEQUENCES, largest, raw_overhead
from .base import EngineReport, EngineRequest, RankShare, rank_weights, stage_pools

NAME = "raw"


def plan(req: EngineRequest) -> EngineReport:
    weights, shares = rank_weights(req)
    overhead = raw_overhead(req.spec).bytes
    opts = req.cache

    def cache(sh: RankShare, ctx: int, n: int) -> int:
        return sh.cache(ctx, n, opts).total_bytes

    pools = stage_pools(req, shares, overhead)

    def ok_ctx(ctx: int) -> bool:
        return ctx == 0 or all(cache(sh, ctx, req.sequences) <= pool
                               for sh, pool in zip(shares, pools, strict=True))

    def ok_seqs(n: int) -> bool:
        return n == 0 or all(cache(sh, req.context, n) <= pool for sh, pool in zip(shares, pools, strict=True))

    max_ctx = largest(ok_ctx, 1 << 31)
    max_seqs = largest(ok_seqs, MAX_SEQUENCES)
    slack = [pool - cache(sh, req.context, req.sequences) for sh, pool in zip(shares, pools, strict=True)]
    binding = min(range(len(shares)), key=slack.__getitem__)
    share = shares[binding]
    one = share.cache(req.context, 1, opts)
    tokens = largest(lambda n: n == 0 or cache(share, n, 1) <= pools[binding], 1 << 31)
    size = share.cache(req.context, req.sequences, opts)
    lines = [f"stage {binding}: KV {size.kv_bytes:,} B + state {size.state_bytes:,} B of a "
             f"{max(0, pools[binding]):,} B pool; one sequence of {req.context:,} tokens takes "
             f"{one.total_bytes:,} B"]
    return EngineReport(
        engine=NAME,
        budget_bytes=None if req.kv_budget_bytes is not None else share.gpu.usable_bytes,  # type: ignore[union-attr]
        weights_bytes=share.weights_bytes,
        overheads=(("runtime (CUDA context + compute buffers)", overhead),),
        kv_pool_bytes=pools[binding],
        kv_tokens=tokens * req.parallel.dp,
        blocks=None,
        block_tokens=None,
        max_concurrency=float(max_seqs),
        max_sequences=max_seqs,
        max_context=max_ctx,
        fits=ok_ctx(req.context),
        log_lines=tuple(lines),
        command="",
        binding_stage=binding,
        extra={"weights": weights.format},
    )
