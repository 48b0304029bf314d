"""The data behind the plan page: verdict, memory bar, chart, format table, breakdown."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvcore import FORMATS, InputError, KvplanError, cache_size
from kvcore.engines import UnsupportedFormat, engine_plan, supported_formats
from kvcore.plan import PlanRequest, plan, raw_overhead
from kvcore.query import (
    Query,
    answer,
    cached_spec,
    card_cache,
    quality_here,
    read_spec,
    to_fit,
)
from kvcore.units import format_bytes, format_quantity

from .charts import COLORS, NARROW, H, W, memory_chart, nice_tokens
from .common import decode_text, model_line, prefill_text, to_fit_text

__all__ = ["plan_view"]


def _per_card(q: Query, data: dict[str, Any]) -> dict[str, Any]:
    """Memory of the binding card split into weights, KV, state, overhead and free."""
    report = data.get("engine_report")
    if report is not None:
        spec, seqs = card_cache(q, report["binding_stage"])
        size = cache_size(spec, q.context, seqs, q.cache)
        budget = report["budget_bytes"] or 0
        overhead = sum(o["bytes"] for o in report["overheads"])
        weights = report["weights_bytes"]
    else:
        size = cache_size(cached_spec(q), q.context, q.sequences, q.cache)
        budget = data["budget_bytes"] or 0
        overhead = data["overhead_bytes"]
        weights = data["weights_bytes"]
    used = weights + size.kv_bytes + size.state_bytes + overhead
    parts = [("weights", weights), ("KV cache", size.kv_bytes), ("state", size.state_bytes),
             ("overhead", overhead)]
    scale = max(budget, used) or 1
    segments = [{"name": n, "bytes": b, "pct": 100 * b / scale, "label": format_bytes(b, 1)}
                for n, b in parts if b > 0]
    free = max(0, budget - used)
    if free:
        segments.append({"name": "free", "bytes": free, "pct": 100 * free / scale,
                         "label": format_bytes(free, 1)})
    over = (f"{format_bytes(used - budget, 1)} over the card's {format_bytes(budget, 1)}"
            + (" budget" if report is not None else "")) if used > budget else None
    return {"segments": segments, "budget": budget, "used": used, "over": over}


def _formats(q: Query) -> list[Any]:
    names = supported_formats(q.engine)
    return [f for f in FORMATS if names is None or f.name in names]


def _format_rows(q: Query) -> list[dict[str, Any]]:
    rows = []
    gpu = q.gpus[0] if q.gpus else None
    # what the engine's pool holds, and what its decode reads (engines keeping every token of a
    # sliding-window layer may still read the window only)
    held = cached_spec(q)
    reads = read_spec(q, held)
    for fmt in _formats(q):
        opts = replace(q.cache, kv_k=fmt, kv_v=fmt)
        trial = replace(q, cache=opts)
        raw = plan(PlanRequest(spec=held, context=q.context, sequences=q.sequences,
                               cache=opts,
                               weights=q.weights, gpu=gpu if not q.multi else None))
        if reads is not held and raw.decode is not None:
            raw = replace(raw, decode=plan(replace(raw.request, spec=reads)).decode)
        row = {"format": fmt.name, "bits": fmt.bits_per_value,
               "bytes_per_token": raw.bytes_per_token,
               "marginal": raw.marginal_bytes_per_token, "quality": quality_here(q.spec, opts)[1],
               "chosen": fmt.name == q.cache.kv_k.name and fmt.name == q.cache.kv_v.name,
               "max_context": raw.max_context, "max_sequences": raw.max_sequences,
               "fits": raw.fits,
               "tokens_per_s": raw.decode.tokens_per_s_per_sequence if raw.decode else None}
        if q.engine != "raw" or q.multi:
            try:
                rep = engine_plan(q.engine, trial.engine_request())
            except (UnsupportedFormat, InputError):
                continue
            row.update(max_context=rep.max_context, max_sequences=rep.sequences_max,
                       fits=rep.fits)
        rows.append(row)
    return rows


def _chart(q: Query, data: dict[str, Any], fit_format: str | None = None) -> str:
    """Memory against context: the chosen format, f16 and q4_0 for reference, and
    ``fit_format`` (the "to fit" line's KV format, where that is the change) beside them."""
    report = data.get("engine_report")
    spec, seqs = (card_cache(q, report["binding_stage"]) if report
                  else (cached_spec(q), q.sequences))
    if report:
        fixed = report["weights_bytes"] + sum(o["bytes"] for o in report["overheads"])
        limit = report["budget_bytes"]
    else:
        fixed = data["weights_bytes"] + raw_overhead(q.spec).bytes
        limit = data["budget_bytes"]
    max_ctx = data.get("max_context")
    x_max = nice_tokens(max(2 * q.context, int((max_ctx or 0) * 1.25), 8192))
    x_max = min(x_max, 1 << 24)
    chosen = q.cache
    series_opts = [(f"{chosen.kv_k.name}" if chosen.kv_k.name == chosen.kv_v.name
                    else f"K {chosen.kv_k.name} / V {chosen.kv_v.name}", chosen)]
    supported = supported_formats(q.engine)
    for name in ("f16", "q4_0", fit_format):
        if (name is not None and name != chosen.kv_k.name
                and all(name != n for n, _ in series_opts)
                and (supported is None or name in supported)):
            series_opts.append((name, replace(chosen, kv_k=FORMATS_BY[name],
                                              kv_v=FORMATS_BY[name])))
    # a colour a role, the same on every page: the chosen format's, f16's, q4_0's, the one
    # that fits
    role = {fit_format: 3, "f16": 1, "q4_0": 2}
    colors = [COLORS[0]] + [COLORS[role[name]] for name, _ in series_opts[1:]]
    series = []
    for name, opts in series_opts:
        pts = []
        for i in range(41):
            ctx = max(1, x_max * i // 40)
            pts.append((ctx, fixed + cache_size(spec, ctx, seqs, opts).total_bytes))
        series.append((name, pts))
    ask = fixed + cache_size(spec, q.context, seqs, chosen).total_bytes
    # the desktop's drawing, and a smaller one with larger text that a phone shows instead
    return "".join(memory_chart(series, limit_bytes=limit, max_context=max_ctx,
                                context=q.context, ask_bytes=ask, colors=colors, size=size,
                                narrow=narrow)
                   for size, narrow in (((W, H), False), (NARROW, True)))


FORMATS_BY = {f.name: f for f in FORMATS}


def plan_view(q: Query) -> dict[str, Any]:
    data = answer(q)
    seqs = q.sequences
    ask = f"{format_quantity(q.context, 'token')} × {format_quantity(seqs, 'sequence')}"
    card = f"{len(q.gpus) if len(q.gpus) > 1 else q.parallel.ranks_per_replica} × " \
           f"{q.gpus[0].name}" if q.gpus else "no card"
    if data["fits"] is None:
        verdict = f"{ask} needs {format_bytes(data['total_bytes'], 1)}; choose a GPU to check."
    elif data["fits"]:
        verdict = (f"Fits: {ask} on {card} under {q.engine}; max context "
                   f"{data['max_context']:,}, max sequences {data['max_sequences']:,}.")
    else:
        verdict = (f"Does not fit: {ask} on {card} under {q.engine}; max context "
                   f"{data['max_context']:,} at {format_quantity(seqs, 'sequence')}.")
    view: dict[str, Any] = {"data": data, "verdict": verdict, "fits": data["fits"],
                            "breakdown": data["breakdown"],
                            "command": (data.get("engine_report") or {}).get("command", ""),
                            "notes": [*data["notes"],
                                      *(data.get("engine_report") or {}).get("notes", [])],
                            "log_lines": (data.get("engine_report") or {}).get("log_lines", [])}
    text = decode_text(data)
    view["decode"] = f"Decode {text}." if text else None
    text = prefill_text(data)
    view["prefill"] = f"Prefill {text}." if text else None
    # what the CLI prints besides: the model, the weights and overhead it assumed, what binds
    w = data["weights"]
    view["model_line"] = model_line(data)
    view["assumed"] = (f"Weights {format_bytes(data['weights_bytes'], 2)} ({w['format']}, "
                       f"{w['source']}, {w['params'] / 1e9:.2f}B params); overhead "
                       f"{format_bytes(data['overhead_bytes'], 2)} "
                       f"({data['overhead']['detail']}).")
    view["binding"] = (f"Binding: {data['binding']} ({data['binding_reason']})."
                       if data["fits"] is False and data.get("binding") else None)
    fix = to_fit(q, data)
    view["to_fit"] = f"To fit: {to_fit_text(fix, alternative=False)}" if fix else None
    view["to_fit_fields"] = _to_fit_fields(q, fix)
    other = fix.get("or") if fix else None
    view["to_fit_or"] = to_fit_text(other) if other else None
    view["to_fit_or_fields"] = _to_fit_fields(q, other)
    if data.get("engine_report"):
        from .cli import render_engine

        # the engine's own table, log lines and verdict, as the CLI prints them; its command
        # and notes have their own places on the page
        view["engine_lines"] = [line for line in render_engine(data)[1:]
                                if not line.startswith(("command: ", "note: "))]
    if not q.gpus:
        view["cards"] = _card_rows(q)
        if view["cards"]:
            view["verdict"] = f"{verdict} The cards that fit are below."
    if q.gpus:
        view["bar"] = _per_card(q, data)
        view["chart"] = _chart(q, data, fix.get("kv") if fix else None)
        view["formats"] = _format_rows(q)
        view["weight_rows"] = _weight_rows(q, data)
        view["weight_host"] = any("host_fit" in r for r in view["weight_rows"])
    return view


def _to_fit_fields(q: Query, fix: dict[str, Any] | None) -> dict[str, str] | None:
    """The form's fields that make the "to fit" change (pages link the line to the plan with
    them); None where there is none, or where fewer LoRA slots are the change but the form
    cannot hold the plan's other LoRA settings (--fully-sharded-loras; its target modules
    it holds)."""
    if not fix:
        return None
    if "max_loras" in fix:
        lora = q.settings.lora
        if lora is not None and lora.fully_sharded:
            return None
        return {"max_loras": str(fix["max_loras"])}
    if "gpu_limit" in fix:
        return {"gpu_limit": fix["gpu_limit"]}
    if "kv" in fix:
        # with the weights beside it where the change is both
        return {"kv_k": fix["kv"], "kv_v": fix["kv"],
                **({"weights": fix["weights"]} if "weights" in fix else {})}
    if "weights" in fix:
        return {"weights": fix["weights"]}
    if "attn_dp" in fix and "gpus" not in fix:
        return {"attn_dp": str(fix["attn_dp"])}
    if "max_mamba_cache_size" in fix:
        return {"max_mamba_cache_size": str(fix["max_mamba_cache_size"])}
    for key in ("n_cpu_moe", "ngl"):
        if key in fix:
            return {key: str(fix[key])}
    return {"gpu": fix["gpu"], "gpus": str(fix["gpus"]),
            **{k: str(fix[k]) for k in ("tp", "pp", "attn_dp") if k in fix}}


def _card_rows(q: Query) -> list[dict[str, Any]]:
    """Without a card: the catalog cards that fit (find_gpu_for, as --find-gpu lists them),
    each with the page's ``gpu`` for it ("4xmi325x")."""
    from kvcore.query import find_gpu_for

    try:
        rows = find_gpu_for(q)
    except KvplanError:
        return []
    for r in rows:
        r["gpu_field"] = f"{r['count']}x{r['gpu']}" if r["count"] > 1 else r["gpu"]
    return rows


def _weight_rows(q: Query, data: dict[str, Any]) -> list[dict[str, Any]]:
    """find_weights under the page's fields, the plan's own weights marked."""
    from kvcore.query import find_weights

    try:
        rows = find_weights(q)
    except KvplanError:
        return []
    for r in rows:
        r["chosen"] = r["weights"] == data["weights"]["format"]
    return rows
