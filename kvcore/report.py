"""Plans as plain JSON-able dicts: the one shape the CLI's --json and the API return."""

from __future__ import annotations

from typing import Any

from .model import ModelSpec
from .plan import Plan

__all__ = ["model_summary", "plan_to_dict"]


def draft_summary(spec: ModelSpec) -> dict[str, Any]:
    """A separate draft model as a plan's JSON gives it: its name, layers, the f16 K + V bytes a
    token of its layers and its weights as priced."""
    from .kv import bytes_per_token

    assert spec.draft is not None
    d = spec.draft
    return {"name": d.name, "hub_repo": d.spec.hub_repo, "model_type": d.spec.model_type,
            "source": d.spec.source, "layers": d.spec.num_layers, "params": d.spec.params.total,
            "vocab_size": d.spec.vocab_size, "weights_bytes": d.weight_bytes,
            "weights_format": d.weight_format, "weights_source": d.weight_source,
            "method": d.method, "bytes_per_token_f16": bytes_per_token(d.spec)}


def model_summary(spec: ModelSpec) -> dict[str, Any]:
    from .draft import head_params

    return {
        "name": spec.name,
        "hub_repo": spec.hub_repo,
        "model_type": spec.model_type,
        "source": spec.source,
        "layers": spec.num_layers,
        "kinds": [k.value for k in spec.kinds],
        # an EAGLE head's own (its embedding and lm_head are its target's)
        "params": head_params(spec) or spec.params.total,
        "active_params": spec.params.active,
        "max_position_embeddings": spec.max_position_embeddings,
        "cacheless_layers": spec.cacheless_layers,
        "kv_shared_layers": spec.kv_shared_layers,
        "dtype": spec.dtype,
        "defaulted_fields": list(spec.defaulted),
        "groups": [
            {
                "kind": g.kind.value,
                "layers": g.count,
                "layer_indices": list(g.layers),
                "n_kv_heads": g.n_kv_heads,
                "head_dim_k": g.head_dim_k,
                "head_dim_v": g.head_dim_v,
                "window": g.window,
                "state_values": g.state_values,
                "mtp": g.mtp,
                "ratio": g.ratio,
                "read_limit": g.read_limit,
                "description": g.describe(),
            }
            for g in spec.groups
        ],
    }


def plan_to_dict(p: Plan) -> dict[str, Any]:
    req, opts = p.request, p.request.cache
    out: dict[str, Any] = {
        "model": model_summary(req.spec),
        "engine": "raw",
        "context": req.context,
        "sequences": req.sequences,
        "kv_k": opts.kv_k.name,
        "kv_v": opts.kv_v.name,
        "kv_bytes": p.kv_bytes,
        "k_bytes": p.cache.k_bytes,
        "v_bytes": p.cache.v_bytes,
        "state_bytes": p.state_bytes,
        "weights_bytes": p.weights.bytes,
        "overhead_bytes": p.overhead.bytes,
        "total_bytes": p.total_bytes,
        "bytes_per_token": p.bytes_per_token,
        "marginal_bytes_per_token": p.marginal_bytes_per_token,
        "weights": {
            "format": p.weights.format,
            "source": p.weights.source,
            "params": p.weights.params,
            "active_bytes": p.weights.active_bytes,
        },
        "overhead": {"bytes": p.overhead.bytes, "detail": p.overhead.detail},
        "gpu": None,
        "budget_bytes": p.budget_bytes,
        "fits": p.fits,
        "max_context": p.max_context,
        "max_sequences": p.max_sequences,
        "binding": p.binding,
        "binding_reason": p.binding_reason or None,
        "decode": None,
        "prefill": None,
        "breakdown": [
            {
                # a sliding-window group an engine keeps whole keeps its name
                "kind": g.group.dropped_kind or g.group.kind.value,
                "layers": g.group.count,
                "mtp": g.group.mtp,
                # the layers of a separate draft model (kvcore.draft)
                "draft": g.group.mtp and req.spec.draft is not None,
                "tokens_per_sequence": g.tokens,
                "k_bytes": g.k_bytes,
                "v_bytes": g.v_bytes,
                "state_bytes": g.state_bytes,
                "state_values": g.group.state_values,
                "scale_bytes": g.scale_bytes,
                "bytes": g.total_bytes,
                "description": g.group.describe(),
                # of the group's layers, those an engine keeps at the model's dtype
                "kept_layers": g.kept_layers,
                "kept_format": g.kept_format or None,
                # how the engine stores the group where not in the cache's format
                "stored": g.stored or None,
            }
            for g in p.cache.groups
        ],
    }
    if req.spec.draft is not None:
        out["draft"] = draft_summary(req.spec)
    if opts.hot_format is not None and opts.hot_tokens:
        out["hot"] = {"format": opts.hot_format.name, "tokens": opts.hot_tokens}
    if opts.keep_fraction < 1:
        out["eviction"] = {"keep_fraction": opts.keep_fraction, "keep_first": opts.keep_first,
                           "keep_recent": opts.keep_recent}
    gpu = req.gpu
    if gpu is not None:
        out["gpu"] = {"id": gpu.id, "name": gpu.name, "memory_bytes": gpu.memory_bytes,
                      "usable_bytes": gpu.usable_bytes,
                      "bandwidth_bytes_per_s": gpu.bandwidth_bytes_per_s,
                      "matmul_flops_per_s": gpu.matmul_flops_per_s}
    if p.decode is not None:
        d = p.decode
        out["decode"] = {
            "bytes_per_step": d.bytes_per_step,
            "seconds_per_step": d.seconds_per_step,
            "tokens_per_s_per_sequence": d.tokens_per_s_per_sequence,
            "tokens_per_s_total": d.tokens_per_s_total,
            "kv_share": d.kv_share,
            "sparse_read": d.sparse,
            "expert_share": d.expert_share,
            "flops_per_step": d.flops_per_step,
            "bandwidth_seconds_per_step": d.bandwidth_seconds,
            "compute_seconds_per_step": d.compute_seconds,
            "bound": d.bound,
        }
    if p.prefill is not None:
        out["prefill"] = prefill_to_dict(p.prefill.tokens, p.prefill.flops,
                                         p.prefill.attention_flops, p.prefill.seconds,
                                         p.prefill.bound)
    return out


def prefill_to_dict(tokens: int, flops: int, attention: int, seconds: float,
                    bound: str) -> dict[str, Any]:
    """A prefill estimate as JSON: one sequence's prompt of ``tokens`` tokens."""
    return {"tokens": tokens, "flops": flops, "attention_flops": attention,
            "seconds": seconds, "tokens_per_s": tokens / seconds, "bound": bound}


def engine_to_dict(r: Any) -> dict[str, Any]:
    """An EngineReport as JSON."""
    return {
        "engine": r.engine,
        "budget_bytes": r.budget_bytes,
        "weights_bytes": r.weights_bytes,
        "overheads": [{"name": n, "bytes": b} for n, b in r.overheads],
        "kv_pool_bytes": r.kv_pool_bytes,
        "kv_tokens": r.kv_tokens,
        "blocks": r.blocks,
        "block_tokens": r.block_tokens,
        "max_concurrency": r.max_concurrency,
        "max_context": r.max_context,
        "fits": r.fits,
        "log_lines": list(r.log_lines),
        "command": r.command,
        "notes": list(r.notes),
        "binding_stage": r.binding_stage,
        "offload_tokens": r.offload_tokens,
        "extra": r.extra,
    }
