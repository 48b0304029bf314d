"""Turn the fields a user gives (CLI flags or API fields) into a kvcore Query: one place for
both faces, so the CLI and the API answer the same question the same way."""

from __future__ import annotations

import math
from typing import Any

from kvcore import (
    CacheOptions,
    CatalogEntry,
    InputError,
    bytes_per_token,
    counted_gpu,
    find_gpu,
    get_format,
    gpu_selection,
    load_model,
    marginal_bytes_per_token,
    parse_bytes,
    parse_count,
    parse_tokens,
)
from kvcore.engines import GGML_ENGINES, EngineSettings, canonical, engines_on
from kvcore.engines.base import MiB
from kvcore.engines.llamacpp_offload import PINNED_COPY_SHARE
from kvcore.engines.ollama import auto_context
from kvcore.errors import shown
from kvcore.gpus import with_limit
from kvcore.model import ModelSpec
from kvcore.parallel import Parallel
from kvcore.query import Query
from kvcore.units import format_quantity

__all__ = ["ENGINE_FLAGS", "LAUNCH_LINES", "cards_of", "check_find_format", "check_find_gpu", "check_find_model", "check_find_weights", "decode_text", "engine_field", "gpu_list", "make_query", "model_line", "named", "prefill_text", "rate_text", "repeated_field", "verified"]


def repeated_field(pairs: Any) -> InputError | None:
    """The error for a query string that gives a field more than once (``?kv=q8_0&kv=q4_0``),
    or None: which one was meant is not a guess to make."""
    seen: dict[str, list[str]] = {}
    for key, value in pairs:
        seen.setdefault(key, []).append(value)
    for key, values in seen.items():
        if len(values) > 1:
            given = " and ".join(shown(v) for v in values[:3]) + (" and more"
                                                                  if len(values) > 3 else "")
            return InputError(f"{key} is given {len(values)} times ({given}); give it once",
                              field=key)
    return None


def _count(value: Any, field: str, minimum: int = 1, maximum: int = 1024) -> int | None:
    if value is None or value == "":
        return None
    return parse_count(value, field=field, minimum=minimum, maximum=maximum)


def cards_of(text: str, field: str) -> tuple[int, Any]:
    """(count, card) of one name: ``4090`` one card, ``2x4090`` two."""
    rig = counted_gpu(text, field=field)
    return rig if rig is not None else (1, find_gpu(text))


def _gpus(gpu: str | None, gpus: str | int | None
          ) -> tuple[int, list[Any], bool, tuple[str, str, str] | None]:
    """(card count, GPUs named, whether a list was given, and where a count was given, in gpus
    or before the card in gpu (``2x4090``): (what says it, the field, what to leave out))."""
    named: list[Any] = []
    count = 1
    listed = False
    counted: tuple[str, str, str] | None = None
    if gpus:
        text = str(gpus).strip()
        if text.lstrip("-").isdigit():
            # a count; a negative one fails parse_count's range check
            count = parse_count(text, field="gpus", maximum=1024)
            counted = (f"gpus is {count}", "gpus", "gpus")
        else:
            try:
                for name in (n for n in text.split(",") if n.strip()):
                    n, card = cards_of(name, "gpus")
                    named += [card] * n
            except InputError as exc:
                # the name at fault came in the card list
                exc.field = "gpus"
                raise
            if not named:
                raise InputError("gpus must be a card count (4) or the cards, one per rank "
                                 f"(4090,3090 or 2x4090); got {shown(gpus)}", field="gpus")
            if len(named) > 1024:
                raise InputError(f"gpus lists {len(named):,} cards; at most 1024", field="gpus")
            count, listed = len(named), True
    if gpu:
        if listed:
            raise InputError("give gpu NAME with gpus N, or gpus NAME,NAME, not both",
                             field="gpus")
        rig = counted_gpu(gpu, field="gpu")
        named = [rig[1] if rig else find_gpu(gpu)]
        if rig is not None:
            n = rig[0]
            if counted and n != count:
                raise InputError(f"gpu {shown(gpu)} is {format_quantity(n, 'card')} but gpus is "
                                 f"{count}; give the count once", field="gpus")
            count = n
            counted = counted or (f"gpu {shown(gpu)} is {format_quantity(n, 'card')}", "gpu",
                                  "the count before the card")
    return count, named, listed, counted


def check_find_gpu(*, gpu: Any, gpus: Any, tp: Any, pp: Any, kv_budget: Any = None,
                   dp: Any = 1, attn_dp: Any = 1, prefix: str = "") -> None:
    """find-gpu chooses the card, the count and the layout, and sizes the KV pool on each:
    naming any of them (or the KV budget an engine printed on some card) is a conflict, not
    something to drop without a word. ``prefix`` spells the names as flags (``--``)."""
    given = [name for name, value in (("gpu", gpu), ("gpus", gpus), ("tp", tp), ("pp", pp),
                                      ("dp", None if str(dp).strip() == "1" else dp),
                                      ("attn_dp",
                                       None if str(attn_dp).strip() == "1" else attn_dp),
                                      ("kv_budget", kv_budget))
             if value not in (None, "")]
    if given:
        names = ", ".join(prefix + (name.replace("_", "-") if prefix else name)
                          for name in given)
        raise InputError(f"{prefix}find-gpu chooses the card, how many and their layout, and "
                         f"sizes the KV pool on each; leave out {names}", field=given[0])


def check_find_format(*, kv: Any, kv_k: Any, kv_v: Any, prefix: str = "") -> None:
    """find-format tries every KV format (K = V): a format named beside it would be dropped
    without a word, so naming one is a conflict. ``prefix`` spells the names as flags."""
    given = [name for name, value in (("kv", kv), ("kv_k", kv_k), ("kv_v", kv_v))
             if value is not None]
    if given:
        names = ", ".join(prefix + (name.replace("_", "-") if prefix else name)
                          for name in given)
        raise InputError(f"{prefix}find-format tries every KV format for K and V; leave out "
                         f"{names}", field=given[0])


def check_find_weights(*, weights: Any, prefix: str = "") -> None:
    """find-weights tries every weight format the engine loads: one named beside it would be
    dropped without a word, so naming one is a conflict."""
    if weights not in (None, ""):
        raise InputError(f"{prefix}find-weights tries every weight format; leave out "
                         f"{prefix}weights", field="weights")


def check_find_model(*, given: str | None, gpu: Any, gpus: Any, kv_budget: Any,
                     field: str = "model", prefix: str = "", draft: Any = None) -> None:
    """find-model plans every catalog model on one card: a model named beside it (``given``,
    as the caller spells it, in ``field``) is a conflict, and it needs a card to fit them on
    (``gpu``, or ``gpus`` naming cards: a count alone names none) or a KV budget. ``prefix``
    spells the names as flags (``--``)."""
    if given:
        raise InputError(f"{prefix}find-model tries every catalog model; leave out {given}",
                         field=field)
    if draft not in (None, ""):
        raise InputError(f"{prefix}find-model tries every catalog model, and a draft model "
                         f"pairs with one family's: leave out {prefix}draft", field="draft")
    named = gpus is not None and not str(gpus).strip().isdigit()
    if not gpu and not named and not kv_budget:
        need = "a GPU (--gpu) or a KV budget (--kv-budget)" if prefix else "a gpu or a kv_budget"
        raise InputError(f"{prefix}find-model needs {need} to fit the models on", field="gpu")


def with_draft(spec: ModelSpec, draft: str, weights: str | None, *, engine: str,
               mtp: bool = False, local: bool = True, method: str | None = None) -> ModelSpec:
    """``spec`` with the draft model ``draft`` attached (kvcore.draft), or a one-line refusal:
    with --mtp (one draft at a time), or under an engine that loads no draft model
    (``local``: the draft may be a file or folder here, as the CLI's may, the API's not)."""
    from kvcore.draft import attach, load_draft
    from kvcore.query import refuse_draft_engine

    if mtp:
        raise InputError("mtp drafts with the model's own MTP head and draft with a model of "
                         "its own: give one of them", field="draft")
    refuse_draft_engine(engine)
    return attach(spec, load_draft(draft, allow_local=local), weights, method)


def make_query(
    spec: ModelSpec,
    *,
    context: Any = "8k",  # None: the engine's own (Ollama's num_ctx by the cards)
    sequences: Any = 1,
    kv: str | None = None,
    kv_k: str | None = None,
    kv_v: str | None = None,
    weights: str | None = None,
    gpu: str | None = None,
    gpus: str | int | None = None,
    tp: Any = None,
    pp: Any = None,
    dp: Any = 1,
    attn_dp: Any = 1,
    engine: str = "raw",
    hot: str | None = None,
    keep: float | None = None,
    keep_first: Any = 4,
    keep_recent: Any = 128,
    state_dtype: str = "f32",
    images: Any = 1,
    mtp: bool = False,
    no_mmproj: bool = False,
    kv_budget: str | int | None = None,
    overhead: str | int | None = None,
    settings: EngineSettings | None = None,
    gpu_limit: str | int | None = None,
    draft: str | None = None,
    draft_weights: str | None = None,
    draft_local: bool = True,
    draft_method: str | None = None,
    acceptance: float | None = None,
) -> Query:
    engine = canonical(engine)
    if draft_weights not in (None, "") and draft in (None, ""):
        raise InputError("draft_weights is the draft model's weight format: give the draft "
                         "model too (--draft qwen3-0.6b)", field="draft_weights")
    if draft_method not in (None, "", "auto") and draft in (None, ""):
        raise InputError("draft_method is how the draft model drafts: give the draft model "
                         "too (--draft)", field="draft_method")
    if draft not in (None, ""):
        spec = with_draft(spec, str(draft), draft_weights or None, engine=engine, mtp=mtp,
                          local=draft_local, method=draft_method or None)
        # the draft's layers are the spec's draft groups, counted with the target's (an engine
        # that gives the draft a context of its own, llama.cpp, reads spec.draft)
        mtp = True
    base = kv or "f16"
    hot_format, hot_tokens = None, 0
    if hot:
        fmt, sep, tokens = str(hot).partition(":")
        if not sep or not fmt.strip() or not tokens.strip():
            raise InputError(f"hot must look like f16:4096 (a KV format, a colon, a token "
                             f"count), got {shown(hot)}", field="hot")
        hot_format, hot_tokens = get_format(fmt, field="hot"), parse_tokens(tokens, field="hot")
    if state_dtype not in ("f32", "f16", "bf16"):
        raise InputError(f"state dtype must be f32, f16 or bf16, got {shown(state_dtype)}",
                         field="state_dtype")
    opts = CacheOptions(
        kv_k=get_format(kv_k or base, field="kv_k"),
        kv_v=get_format(kv_v or base, field="kv_v"),
        hot_format=hot_format,
        hot_tokens=hot_tokens,
        keep_fraction=1.0 if keep is None else float(keep),
        keep_first=parse_count(keep_first, field="keep_first", minimum=0),
        keep_recent=parse_count(keep_recent, field="keep_recent", minimum=0),
        state_bytes_per_value=4 if state_dtype == "f32" else 2,
        images=parse_count(images, field="images", minimum=0, maximum=1000),
        mtp=bool(mtp),
        encoder=not (no_mmproj or (settings is not None and settings.language_model_only)),
    )
    count, named, listed, counted = _gpus(gpu, gpus)
    if gpu_limit not in (None, ""):
        if not named:
            raise InputError("gpu_limit is the memory a named GPU may use: give the GPU too "
                             "(--gpu \"strix halo\")", field="gpu_limit")
        named = [with_limit(g, gpu_limit) for g in named]
    tp_n, pp_n = _count(tp, "tp"), _count(pp, "pp")
    dp_n = _count(dp, "dp") or 1
    if tp_n is None and pp_n is None:
        if counted and count % dp_n:
            raise InputError(f"{counted[0]} but dp is {dp_n}: each replica needs its own "
                             "cards, so the card count must be a multiple of dp", field=counted[1])
        # one replica over all the cards: layers split for llama.cpp, heads for the others
        per_replica = max(1, count // dp_n)
        tp_n, pp_n = (1, per_replica) if engine in GGML_ENGINES else (per_replica, 1)
    parallel = Parallel(tp=tp_n or 1, pp=pp_n or 1, dp=dp_n,
                        attn_dp=_count(attn_dp, "attn_dp") or 1)
    if listed and count != parallel.ranks_per_replica:
        raise InputError(f"gpus lists {count} cards but tp × pp is {parallel.ranks_per_replica}",
                         field="gpus")
    if counted and count != parallel.gpus:
        raise InputError(f"{counted[0]} but tp × pp × dp is {parallel.gpus}: give one card "
                         f"per rank, or leave out {counted[2]}", field=counted[1])
    if no_mmproj and engine not in ("llama.cpp", "raw"):
        raise InputError(f"no_mmproj is llama.cpp's: it loads the vision tower from a file of "
                         f"its own (--mmproj); {engine} loads it with the model",
                         field="no_mmproj")
    auto = context is None and engine == "ollama"
    if context is None:
        # the engine's own: Ollama's num_ctx by the cards' memory, else 8k
        context = "8k"
        if engine == "ollama" and named:
            ranks = parallel.ranks_per_replica
            context = auto_context(spec, named if len(named) == ranks else named[:1] * ranks)
    return Query(
        spec=spec,
        context=parse_tokens(context),
        sequences=parse_count(sequences, field="sequences"),
        cache=opts,
        weights=weights,
        gpus=tuple(named),
        parallel=parallel,
        engine=engine,
        settings=settings or EngineSettings(),
        kv_budget_bytes=parse_bytes(kv_budget, field="kv_budget") if kv_budget else None,
        overhead_bytes=(parse_bytes(overhead, field="overhead", zero=True)
                        if overhead not in (None, "") else None),
        auto_context=auto,
        acceptance=acceptance,
    )


def gpu_list(vendor: str | None = None, min_memory: str | None = None,
             engine: str | None = None, *, vendor_field: str = "vendor",
             memory_field: str = "min_memory", segment: str | None = None,
             segment_field: str = "segment") -> tuple[Any, ...]:
    """The catalog's cards as the GPU lists filter them: one maker's, with at least a
    memory, one kind of card (kvcore.gpu_selection), and those an engine's GPU build runs
    on (engines_on; raw sizes every card)."""
    cards = gpu_selection(vendor, min_memory, vendor_field=vendor_field,
                          memory_field=memory_field, segment=segment,
                          segment_field=segment_field)
    if engine is None:
        return cards
    name = canonical(engine)
    return tuple(g for g in cards if name == "raw" or name in engines_on(g))


def model_entry(entry: CatalogEntry, sources: bool = False) -> dict[str, Any]:
    """A catalog model as `kvplan models --json` and /api/v1/models list it: its names, its
    size, its layers, the f16 K + V bytes a token of one sequence (while the context is shorter
    than every window, and each token past them) and the positions it was trained for
    (``sources``: with where its config came from, as the API gives it)."""
    from kvcore.draft import head_method, head_params

    spec = load_model(entry.id)
    item: dict[str, Any] = {
        "id": entry.id, "repo": entry.repo, "family": entry.family,
        # an EAGLE head's own parameters (its embedding and lm_head are the target's)
        "params": head_params(spec) if entry.head_of else spec.params.total,
        "layers": spec.num_layers,
        "kinds": [k.value for k in spec.kinds],
        "bytes_per_token_f16": bytes_per_token(spec),
        "marginal_bytes_per_token_f16": marginal_bytes_per_token(spec),
        "max_position_embeddings": spec.max_position_embeddings}
    if sources:
        item["source"] = entry.source
    item["aliases"] = [a.repo for a in entry.aliases]
    if entry.head_of:
        # a draft head: planned as its target's --draft, not as a model
        item["head_of"] = entry.head_of
        item["draft_method"] = head_method(spec)
    return item


def gpu_entry(g: Any, sources: bool = False) -> dict[str, Any]:
    """A catalog card as `kvplan gpus --json` and /api/v1/gpus list it (``sources``: with
    where each figure comes from, as the API gives them)."""
    entry = {"id": g.id, "name": g.name, "vendor": g.vendor, "segment": g.segment,
             "memory_bytes": g.memory_bytes,
             "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s,
             "matmul_flops_per_s": g.matmul_flops_per_s,
             "host_link": g.host_link or None, "host_link_bytes_per_s": g.host_link_bytes_per_s,
             # the sizes an Apple chip was sold with (gpu "m3 max 36gb")
             "memory_options_gb": list(g.memory_options_gb),
             # what a plan fills: the driver's total where known, a unified memory's default
             # GPU share
             "usable_bytes": g.usable_bytes, "unified_memory": g.unified,
             # the chip, as the engines' builds name those they run on
             "architecture": g.architecture or None,
             "compute_capability": g.compute_capability or None,
             "llvm_target": g.llvm_target or None,
             # the engines whose GPU builds run on it (raw sizes any card)
             "engines": engines_on(g)}
    if sources:
        entry.update(source=g.source, matmul_flops_source=g.matmul_flops_source,
                     host_link_source=g.host_link_source or None)
    return entry


def answered(query: Query, db_path: Any = None) -> dict[str, Any]:
    """The plan's JSON as ``kvplan --json`` and /api/v1/plan give it: with ``verified`` where
    this exact plan was measured (verified), and ``to_fit`` where it does not fit."""
    from kvcore.query import answer, to_fit

    data = answer(query)
    found = verified(query, db_path)
    if found:
        data["verified"] = found
    fix = to_fit(query, data)
    if fix:
        data["to_fit"] = fix
    return data


def verified(query: Query, db_path: Any = None) -> dict[str, Any] | None:
    """The measurement of exactly this plan (local database first, then the ones shipped with
    kvplan) as {device, predicted_bytes, allocated_bytes, date, source, line}, or None: the
    same model, formats, context and sequences, and a prediction of the same cache bytes as
    this plan's (its options may change them). A database that cannot be read gives None:
    this is a note beside a plan, never its answer."""
    from kvcore.errors import KvplanError
    from kvcore.kv import cache_size
    from kvcore.store import find_measurement
    from kvcore.units import format_bytes

    try:
        whole = cache_size(query.spec, query.context, query.sequences, query.cache).total_bytes
        found = find_measurement(query.spec.name, query.cache.kv_k.name, query.cache.kv_v.name,
                                 query.context, query.sequences, db_path, cache_bytes=whole)
    except KvplanError:
        return None
    if not found:
        return None
    line = (f"verified on {found['device']}: predicted "
            f"{format_bytes(found['predicted_bytes'], 4)}, allocated "
            f"{format_bytes(found['allocated_bytes'], 4)}")
    return {"device": found["device"], "predicted_bytes": found["predicted_bytes"],
            "allocated_bytes": found["allocated_bytes"],
            "date": (found.get("env") or {}).get("date"), "source": found.get("source"),
            "line": line}


def rate_text(x: float | None) -> str:
    """Tokens a second: one decimal, or three significant digits below 10 (never 0.0); a
    dash where there is no estimate."""
    if x is None:
        return "–"
    return f"{x:,.1f}" if x >= 10 else f"{x:.3g}"


def _experts_text(share: float | None, sequences: int, per_engine: int | None = None) -> str:
    """What a step of a mixture of experts reads of its routed experts (empty for a dense
    model, or for one sequence, which reads its top-k); ``per_engine``: the sequences of one
    data-parallel engine where ``sequences`` counts every engine's (vLLM's DP ranks share the
    experts)."""
    if share is None or sequences <= 1:
        return ""
    whose = (f"{sequences:,} sequences' tokens ({per_engine:,} a data-parallel rank)"
             if per_engine is not None and per_engine != sequences
             else f"{sequences:,} sequences' tokens")
    return (f"; the {whose} route to ≈ {share:.0%} of the routed experts' bytes each step "
            "(uniform routing)")


def _bound_where(data: dict[str, Any], bound: str, read: str = "") -> str:
    """What binds an estimate and at what: "bandwidth-bound at 1,008 GB/s" (and ``read``, what
    is read), "compute-bound at 165.2 TFLOPS (its dense FP16/BF16 peak)", or over several
    cards "… on 2 cards (interconnect not counted)"."""
    cards = data["parallel"]["gpus"]
    gpu = data.get("gpu")
    if cards > 1 or not gpu:
        where = f"on {cards} cards (interconnect not counted)"
    elif bound == "compute":
        where = f"at {gpu['matmul_flops_per_s'] / 1e12:,.1f} TFLOPS (its dense FP16/BF16 peak)"
    else:
        where = f"at {gpu['bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s{read}"
    return f"{bound}-bound {where}"


def _link_basis(d: dict[str, Any]) -> str:
    """What a host-link figure is, in words: "" where it was given, "its PCIe 4.0 x8" where
    it is the card's own, "assumed: PCIe 4.0 x16; give --host-link" where the catalog has
    none."""
    basis = d["host_link_from"]
    if basis == "given":
        return ""
    if basis == "assumed":
        return "assumed: PCIe 4.0 x16; give --host-link"
    return f"its {basis}"


def _copy_basis(d: dict[str, Any]) -> str:
    """What a pinned copy's rate is, in words: "" where the link was given (the rate itself),
    else the link it is a share of and that share (PINNED_COPY_SHARE, measured)."""
    basis = _link_basis(d)
    if not basis:
        return ""
    share = f"{PINNED_COPY_SHARE:.0%} of"
    if basis.startswith("its "):
        return f"{share} {basis}, as an H200 copies from pinned memory"
    return f"{share} PCIe 4.0 x16, as an H200 copies from pinned memory (assumed; give --host-link)"


def _card_part(d: dict[str, Any], host_seconds: float) -> tuple[float, str]:
    """The seconds of a decode step the cards take beside the host's part, and what binds
    them (their compute or their memory bandwidth)."""
    bound = "compute" if (d.get("compute_seconds_per_step") or 0) > \
        d["bandwidth_seconds_per_step"] else "bandwidth"
    return d["seconds_per_step"] - host_seconds, bound


def _offload_where(data: dict[str, Any], d: dict[str, Any]) -> str:
    """Where a decode step with --cpu-offload-gb (vLLM, SGLang) spends its time: the share
    reading the host-held weights over the host link (the card's, given, or assumed), and what
    binds the card's part."""
    link = d["offload_link_bytes_per_s"] / 1e9
    basis = _link_basis({"host_link_from": d["offload_link_from"]})
    share = d.get("offload_link_share") or 1.0
    measured = (f" ({share:.0%} of the link's rate, as an H200 measured)" if share < 1 else "")
    over = (f"over {basis} at {link:,.1f} GB/s{measured}" if basis.startswith("its ")
            else f"at {link:,.1f} GB/s" + (f" ({basis}){measured}" if basis else ""))
    part_share = d["offload_seconds_per_step"] / d["seconds_per_step"]
    card, card_bound = _card_part(d, d["offload_seconds_per_step"])
    part = "the cards' part" if data["parallel"]["gpus"] > 1 else "the card's part"
    each = " on each card" if data["parallel"]["tp"] > 1 else ""
    return (f"{part_share:.0%} of a step reading {d['offload_bytes_per_step'] / 1e9:,.2f} GB of "
            f"--cpu-offload-gb weights{each} from host memory {over}, {part} "
            f"({card * 1e3:,.2f} ms) {_bound_where(data, card_bound)}")


def _host_where(data: dict[str, Any], d: dict[str, Any]) -> str:
    """Where a decode step with part of the model in host memory spends its time: the share
    the host's part takes (the CPU reading it at host memory's bandwidth or, from 32
    sequences, its weights copied to the card over the host link), each figure given or the
    assumed default, and what binds the card's part."""
    bw = d["host_bandwidth_bytes_per_s"] / 1e9
    came = d.get("host_bandwidth_from", "assumed")
    assumed_bw = {"given": "",
                  "assumed": " (assumed: dual-channel DDR5-5600; give --host-bandwidth)",
                  "assumed server": " (assumed for a data-center card: a server socket's "
                                    "8-channel DDR5-4800; give --host-bandwidth)",
                  }.get(came, f" ({came}; give --host-bandwidth)")
    card, card_bound = _card_part(d, d["host_seconds_per_step"])
    share = f"{d['host_seconds_per_step'] / d['seconds_per_step']:.0%} of a step"
    if d.get("op_offload"):
        link = d["host_link_bytes_per_s"] / 1e9
        basis = _copy_basis(d)
        assumed_link = f" ({basis})" if basis else ""
        host = (f"{share} copying {d['host_weight_bytes_per_step'] / 1e9:,.2f} GB of host-held "
                f"weights to the card at {link:,.1f} GB/s{assumed_link}, as llama.cpp does "
                "from 32 sequences")
        if d.get("host_cache_bytes_per_step"):
            host += (f", and {d['host_cache_bytes_per_step'] / 1e9:,.2f} GB of host-held "
                     "caches from pageable memory at "
                     f"{d['host_cache_copy_bytes_per_s'] / 1e9:,.1f} GB/s (assumed: the H200 "
                     "machine's rate)")
    else:
        host = (f"{share} reading {d['host_bytes_per_step'] / 1e9:,.2f} GB from host memory at "
                f"{bw:,.1f} GB/s{assumed_bw}")
    part = "the cards' part" if data["parallel"]["gpus"] > 1 else "the card's part"
    return f"{host}, {part} ({card * 1e3:,.2f} ms) {_bound_where(data, card_bound)}"


def decode_text(data: dict[str, Any]) -> str | None:
    """A plan's decode estimate in words, after "decode" (None without one): on one card at
    its bandwidth or, where the step is compute-bound, its matrix peak, or over several (the
    interconnect not counted); what a mixture of experts' batch reads of its experts; a plan
    that does not fit says the figure is what it would take."""
    d = data.get("decode")
    if not d:
        return None
    if d.get("host_bytes_per_step") is not None:
        where = _host_where(data, d)
    elif d.get("offload_bytes_per_step") is not None:
        where = _offload_where(data, d)
    else:
        where = _bound_where(data, d.get("bound") or "bandwidth")
    text = (f"≈ {rate_text(d['tokens_per_s_per_sequence'])} tokens/s per sequence "
            f"({rate_text(d['tokens_per_s_total'])} total) at full context, {where}; "
            f"{_cache_read(data)} {d['kv_share'] * 100:.0f}% of bytes read"
            + ("; sparse attention reads its top-k entries only" if d.get("sparse_read") else "")
            + _lora_read_text(d)
            + _experts_text(d.get("expert_share"), d.get("expert_sequences") or data["sequences"],
                            data["sequences"]))
    sp = d.get("speculative")
    if sp:
        text += (f"; with the draft at acceptance {sp['acceptance']:g} ({sp['draft_tokens']} "
                 f"draft tokens a round, ≈ {sp['tokens_per_round']:.2f} tokens a round): ≈ "
                 f"{rate_text(sp['tokens_per_s_per_sequence'])} tokens/s per sequence, "
                 f"{sp['speedup']:.2f}× the target alone")
    return text + (" (if it fit)" if data["fits"] is False else "")


def _lora_read_text(d: dict[str, Any]) -> str:
    """What a decode step reads of LoRA adapters, where it reads any."""
    read = d.get("lora_bytes_per_step")
    if not read:
        return ""
    # an engine's adapter slots (vLLM, SGLang), or llama.cpp's --lora adapters (no slots)
    slots = d.get("lora_slots")
    which = (f"{d['lora_adapters_read']} of {slots} adapter slot{'s' if slots > 1 else ''}, "
             "one a sequence" if slots else "the --lora adapters")
    return f"; LoRA is {100 * read / d['bytes_per_step']:.0f}% ({which})"


def _cache_read(data: dict[str, Any]) -> str:
    """What a decode step's cache share counts: "KV is", "KV and state are" (a hybrid's
    recurrent state, read and written each step) or "state is" (a model of state alone)."""
    if not data.get("state_bytes"):
        return "KV is"
    return "KV and state are" if data.get("kv_bytes") else "state is"


def prefill_text(data: dict[str, Any]) -> str | None:
    """A plan's prefill estimate in words, after "prefill" (None without one): one
    sequence's prompt of the full context at the card's matrix peak, or over several."""
    p = data.get("prefill")
    if not p:
        return None
    seconds = p["seconds"]
    took = f"{seconds:,.1f} s" if seconds >= 1 else f"{seconds * 1e3:,.0f} ms"
    share = p["attention_flops"] / p["flops"] if p["flops"] else 0.0
    if p.get("host_link_bytes") is not None:
        link = p["host_link_bytes_per_s"] / 1e9
        basis = _copy_basis(p)
        given = f", {basis}" if basis else ""
        caches = ""
        if p.get("host_cache_copy_bytes") is not None:
            caches = (f", {p['host_cache_copy_seconds'] / p['seconds']:.0%} copying the "
                      f"host-held blocks' caches ({p['host_cache_copy_bytes'] / 1e9:,.1f} GB "
                      f"from pageable memory at {p['host_cache_copy_bytes_per_s'] / 1e9:,.1f} "
                      "GB/s, assumed: the H200 machine's rate)")
        where = (f"{p['host_link_seconds'] / p['seconds']:.0%} of it copying the host-held "
                 f"weights to the card for each of {p['batches']:,} batches of "
                 f"{p['n_ubatch']:,} tokens ({p['host_link_bytes'] / 1e9:,.1f} GB at "
                 f"{link:,.1f} GB/s{given}){caches}, the rest "
                 f"{_bound_where(data, 'compute' if p['bound'] == 'host link' else p['bound'])}")
    elif p.get("offload_seconds") is not None:
        reads = p["offload_reads_per_forward"]
        times = "once" if reads == 1 else f"{reads:,} times"
        where = (f"{p['offload_seconds'] / p['seconds']:.0%} of it reading the "
                 f"--cpu-offload-gb weights over the host link {times} in each of "
                 f"{p['offload_forwards']:,} forward passes, the rest "
                 f"{_bound_where(data, p['bound'], ' (the weights read once)')}")
    else:
        where = _bound_where(data, p["bound"], " (the weights read once)")
    text = (f"≈ {took} for a prompt of {p['tokens']:,} tokens ({rate_text(p['tokens_per_s'])} "
            f"tokens/s), {where}; attention is {share:.0%} of its FLOPs")
    if any(g["kind"] in ("indexer", "index") for g in data.get("breakdown", ())):
        text += " (the indexer's scores not counted)"
    return text + (" (if it fit)" if data["fits"] is False else "")


def _overlap(m: dict[str, Any]) -> bool:
    """Whether some layer holds caches of two kinds (Falcon-H1's attention and Mamba side by
    side, DeepSeek-V4's window and compressed parts): the kinds' counts add past the layers."""
    return bool(sum(g["layers"] for g in m["groups"] if not g["mtp"]) > m["layers"])


def model_line(data: dict[str, Any]) -> str:
    """A plan's model in one line: its repo, type and layers by kind (what the CLI prints
    first)."""
    m = data["model"]
    mtp = sum(g["layers"] for g in data["breakdown"] if g["mtp"])
    # KV-shared layers (Gemma 4, Gemma-3n) attend over another layer's cache; the rest of the
    # cacheless layers have no attention at all
    shared = m.get("kv_shared_layers") or 0
    own_less = (m.get("cacheless_layers") or 0) - shared
    return (f"{m['hub_repo'] or m['name']} ({m['model_type']}, "
            f"{format_quantity(m['layers'], 'layer')}: "
            + ", ".join(f"{g['layers']} {g['kind']}"
                        + (f" 1:{g['ratio']}" if g.get("ratio", 1) > 1 else "")
                        for g in m["groups"] if not g["mtp"])
            + ("; a layer holds more than one" if _overlap(m) else "")
            + (f"; {shared:,} more reading an earlier layer's cache" if shared else "")
            + (f"; {own_less:,} more with no cache, MLP or MoE only" if own_less else "")
            + (f"; draft {data['draft']['name']}, {format_quantity(mtp, 'layer')}"
               if mtp and data.get("draft") else
               f"; {format_quantity(mtp, 'MTP layer')} counted" if mtp else "") + ")")


def tensor_split_of(value: list[float] | str | None) -> tuple[float, ...] | None:
    """-ts shares as a list of numbers or the command line's text ("3,1")."""
    from kvcore.engines import parse_tensor_split
    from kvcore.engines.base import check_tensor_split

    if value is None:
        return None
    if isinstance(value, str):
        return parse_tensor_split(value)
    return check_tensor_split(tuple(float(x) for x in value))


def _listed(value: list[int | str] | str | None) -> str | None:
    """A list setting as EngineSettings keeps it: the entries (layer numbers or words) joined
    by commas (None: not given)."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    text = ",".join(str(v) for v in items)
    return text if text.strip() else None


def settings_from(src: Any, **given: Any) -> EngineSettings:
    """The engine settings of a request, from ``src``'s fields under the CLI's and the API's
    shared names (the parsed command line, or a request body); ``given`` (EngineSettings'
    own names) wins over them."""
    from kvcore import parse_bytes
    from kvcore.engines import CPU_MOE
    from kvcore.engines.llamacpp_offload import split_overrides
    from kvcore.engines.lora import lora_from

    return EngineSettings(**{**dict(
        gpu_memory_utilization=src.gpu_memory_utilization,
        max_num_batched_tokens=src.max_num_batched_tokens, block_size=src.block_size,
        speculative_tokens=src.speculative_tokens, n_ubatch=src.ubatch,
        fit_margin_bytes=src.fit_target * MiB if src.fit_target is not None else None,
        swa_full=src.swa_full, kv_unified=src.kv_unified or None,
        sched_spread=bool(src.sched_spread),
        flash_attn=False if src.no_flash_attn else None,
        prefix_caching=not src.no_prefix_caching, enforce_eager=src.enforce_eager,
        extensible_kv_cache=not src.no_extensible_kv_cache,
        extensible_kv_cache_asked=src.enable_extensible_kv_cache,
        language_model_only=src.language_model_only,
        lora=lora_from(src.enable_lora, src.max_loras, src.max_lora_rank,
                       src.fully_sharded_loras, src.lora_target_modules),
        mem_fraction_static=src.mem_fraction_static,
        chunked_prefill_size=src.chunked_prefill_size, page_size=src.page_size,
        max_total_tokens=src.max_total_tokens,
        cuda_graph_max_bs_decode=src.cuda_graph_max_bs_decode,
        cuda_graph_max_bs_prefill=src.cuda_graph_max_bs_prefill,
        decode_cuda_graph=not src.disable_decode_cuda_graph,
        prefill_cuda_graph=not src.disable_prefill_cuda_graph,
        dp_lm_head=src.enable_dp_lm_head, moe_a2a_backend=src.moe_a2a_backend,
        swa_full_tokens_ratio=src.swa_full_tokens_ratio,
        mamba_full_memory_ratio=src.mamba_full_memory_ratio,
        max_mamba_cache_size=src.max_mamba_cache_size,
        radix_cache=not src.disable_radix_cache,
        prefill_kv_cache_dequant_dtype=src.prefill_kv_cache_dequant_dtype or None,
        draft_kv=src.draft_kv or None,
        attention_backend=src.attention_backend or None,
        kv_cache_dtype_skip_layers=_listed(src.kv_cache_dtype_skip_layers),
        free_gpu_memory_fraction=src.free_gpu_memory_fraction,
        tokens_per_block=src.tokens_per_block, max_num_tokens=src.max_num_tokens,
        offload_bytes=parse_bytes(src.offload, field="offload") if src.offload else 0,
        n_gpu_layers=src.ngl, n_cpu_moe=CPU_MOE if src.cpu_moe else src.n_cpu_moe,
        override_tensor=split_overrides(src.override_tensor),
        host_bandwidth_bytes_per_s=(src.host_bandwidth * 1e9
                                    if src.host_bandwidth is not None else None),
        host_memory_bytes=(parse_bytes(src.host_memory, field="host_memory")
                           if src.host_memory is not None else None),
        cache_ram_mib=src.cache_ram, ctx_checkpoints=src.ctx_checkpoints,
        host_link_bytes_per_s=src.host_link * 1e9 if src.host_link is not None else None,
        cpu_offload_bytes=gib_bytes(src.cpu_offload_gb, "cpu_offload_gb"),
        tensor_split=tensor_split_of(src.tensor_split)), **given})


def gib_bytes(value: float | str | None, field: str) -> int:
    """GiB as vLLM and SGLang take them (--cpu-offload-gb 10: 10 × 2³⁰ bytes) from a number or
    a form's text; 0 where not given (None or blank)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    try:
        gib = float(value)
    except ValueError:
        gib = math.nan
    if not (math.isfinite(gib) and 0 <= gib <= 1 << 20):
        raise InputError(f"{field} must be GiB from 0 to 1,048,576, got {shown(value)}",
                         field=field)
    return int(gib * 2**30)


def to_fit_text(fix: dict[str, Any], alternative: bool = True) -> str:
    """The "to fit" line of a plan that does not fit (kvcore.query.to_fit), with its other
    change (``or``) unless ``alternative`` is false."""
    if "gpus" in fix:
        # more cards, in the plan's layout where it gave one (and SGLang's attention groups
        # where those cards need them)
        what = f"--gpu {fix['gpus']}x{fix['gpu']}" + "".join(
            f" --{k.replace('_', '-')} {fix[k]}" for k in ("tp", "pp", "attn_dp") if k in fix)
    elif "weights" in fix and "kv" in fix:
        # weights of more bits beside an 8-bit cache
        what = f"--weights {fix['weights']} --kv {fix['kv']}"
    else:
        what = next(f"{flag} {fix[key]}" for key, flag in
                    (("gpu_limit", "--gpu-limit"),
                     ("kv", "--kv"), ("weights", "--weights"), ("max_loras", "--max-loras"),
                     ("attn_dp", "--attn-dp"), ("max_mamba_cache_size", "--max-mamba-cache-size"),
                     ("n_cpu_moe", "--n-cpu-moe"), ("ngl", "--ngl"))
                    if key in fix)
    rate = fix.get("tokens_per_s_per_sequence")
    speed = f", ≈ {rate:,.1f} tokens/s per sequence" if rate else ""
    quality = f"; {fix['quality']}" if fix.get("quality") else ""
    if fix.get("how"):
        # the machine's own setting that gives the GPU that share
        quality += f"; {fix['how']}"
    more = f"; or {to_fit_text(fix['or'])}" if fix.get("or") and alternative else ""
    return f"{what} fits (max context {fix['max_context']:,}{speed}{quality}){more}"


#: each engine's launch line, as --command takes it
LAUNCH_LINES = {"vLLM": "vllm serve …", "llama.cpp": "llama-server …",
                "SGLang": "python -m sglang.launch_server …", "TensorRT-LLM": "trtllm-serve …"}


def _engine_flags() -> dict[str, tuple[tuple[str, ...], str]]:
    """Engines' own flags, as people type them to kvplan: the engines that take each and
    kvplan's flag for the same choice. argparse would take some of them as an abbreviation
    of another flag (vLLM's --kv-cache-dtype of --kv-cache-dtype-skip-layers) and call the
    rest unrecognized. trtllm-serve's underscores are read as dashes."""
    table = {
        "vLLM": {"--max-model-len": "--ctx", "--max-num-seqs": "--seqs",
                 "--kv-cache-dtype": "--kv", "--tensor-parallel-size": "--tp", "-tp": "--tp",
                 "--pipeline-parallel-size": "--pp", "-pp": "--pp",
                 "--data-parallel-size": "--dp", "-dp": "--dp", "--quantization": "--weights"},
        "llama.cpp": {"-c": "--ctx", "--ctx-size": "--ctx", "-np": "--seqs",
                      "--parallel": "--seqs", "-ctk": "--kv-k", "--cache-type-k": "--kv-k",
                      "-ctv": "--kv-v", "--cache-type-v": "--kv-v", "-ngl": "--ngl",
                      "--n-gpu-layers": "--ngl", "--gpu-layers": "--ngl",
                      "-ts": "--tensor-split", "-ub": "--ubatch", "--ubatch-size": "--ubatch",
                      "-kvu": "--kv-unified", "-md": "--draft", "--model-draft": "--draft"},
        "SGLang": {"--context-length": "--ctx", "--max-running-requests": "--seqs",
                   "--kv-cache-dtype": "--kv", "--quantization": "--weights",
                   "--tp-size": "--tp", "--tensor-parallel-size": "--tp",
                   "--pp-size": "--pp", "--dp-size": "--dp"},
        "TensorRT-LLM": {"--max-seq-len": "--ctx", "--max-batch-size": "--seqs",
                         "--tp-size": "--tp", "--tensor-parallel-size": "--tp",
                         "--pp-size": "--pp", "--pipeline-parallel-size": "--pp",
                         "--kv-cache-free-gpu-memory-fraction": "--free-gpu-memory-fraction"},
    }
    flags: dict[str, tuple[tuple[str, ...], str]] = {}
    for engine, names in table.items():
        for flag, ours in names.items():
            engines, _ = flags.get(flag, ((), ours))
            flags[flag] = ((*engines, engine), ours)
    return flags


#: engines' flags and kvplan's for them (_engine_flags)
ENGINE_FLAGS = _engine_flags()

#: kvplan's flags whose API field is not the flag's own name
_FIELD_OF = {"--ctx": "context", "--seqs": "sequences"}


def engine_field(name: str) -> str | None:
    """For a request field that is an engine's option (``max_model_len``: vLLM's
    --max-model-len), the words naming the API's field for it; else None."""
    engines, ours = ENGINE_FLAGS.get("--" + name.replace("_", "-"), ((), ""))
    if not engines:
        return None
    field = _FIELD_OF.get(ours, ours[2:].replace("-", "_"))
    return f"an option of {named(engines)}, whose field here is {field}"


def named(names: tuple[str, ...]) -> str:
    """Names as a sentence lists them: "a", "a and b", "a, b and c"."""
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1])))
