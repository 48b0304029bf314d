"""HTML pages: the planner form (htmx: a partial for HX-Request, the full page otherwise) and
the model and GPU catalog pages. Each page's data is also served as JSON under /api/v1."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from starlette.datastructures import UploadFile

import kvcore
from kvcore import CacheOptions, InputError, KvplanError, load_model, parse_config_text
from kvcore.catalog import MAX_CONFIG_BYTES, find_models, why_unmatched
from kvcore.engines import (
    CPU_MOE,
    ENGINE_TITLES,
    engine_flags,
    engine_names,
    engines_on,
    parse_tensor_split,
    supported_formats,
)
from kvcore.engines.llamacpp_offload import split_overrides
from kvcore.engines.lora import lora_from
from kvcore.errors import nearest, shown
from kvcore.units import format_bytes, format_gib
from kvcore.weights import WEIGHT_FORMATS

from .api import cache_options, engine_settings
from .common import gib_bytes, gpu_list, make_query, model_entry, repeated_field
from .views import plan_view

__all__ = ["DEFAULTS", "LINK_DEFAULTS", "pages_router", "templates"]

ROOT = Path(__file__).resolve().parent.parent
#: the bare page (no query string) opens on this worked example
DEFAULTS = {"model": "qwen3.5-27b", "gpu": "4090", "gpus": "1", "tp": "", "pp": "", "dp": "",
            "attn_dp": "",
            "context": "128k", "sequences": "1", "kv_k": "q8_0", "kv_v": "q8_0", "weights": "q4_k_m",
            "engine": "raw", "ngl": "", "n_cpu_moe": "", "override_tensor": "", "tensor_split": "",
            "host_bandwidth": "", "host_link": "", "host_memory": "", "cpu_offload_gb": "",
            "cache_ram": "", "ctx_checkpoints": "", "max_loras": "", "max_lora_rank": "",
            "lora_target_modules": ""}
#: a link's fields it leaves out: the CLI's and the API's defaults, so that a link answers what
#: `kvplan` and /api/v1/plan answer for the same fields (no card: the memory it needs)
LINK_DEFAULTS = {"model": "", "gpu": "", "gpus": "1", "tp": "", "pp": "", "dp": "",
                 "attn_dp": "",
                 "context": "8k", "sequences": "1", "kv_k": "f16", "kv_v": "f16", "weights": "auto", "engine": "raw", "ngl": "",
                 "n_cpu_moe": "", "override_tensor": "", "tensor_split": "", "host_bandwidth": "",
                 "host_link": "", "host_memory": "", "cpu_offload_gb": "", "cache_ram": "",
                 "ctx_checkpoints": "", "max_loras": "", "max_lora_rank": "",
                 "lora_target_modules": ""}
#: the form's engine and cache settings (its collapsed group), each under the API's name: the
#: CLI flag it stands for, a placeholder (the default), and whether it is a switch
SETTINGS: dict[str, tuple[tuple[str, str, str, bool], ...]] = {
    "Any engine": (
        ("kv_budget", "--kv-budget", "an engine's KV figure", False),
        ("gpu_limit", "--gpu-limit", "shared memory: the default share", False),
        ("overhead", "--overhead", "estimated", False),
        ("mtp", "--mtp", "", True),
        ("draft", "--draft", "no draft model", False),
        ("draft_weights", "--draft-weights", "its checkpoint's", False),
        ("draft_method", "--draft-method", "auto", False),
        ("draft_kv", "--draft-kv", "f16 (llama.cpp), else the target's", False),
        ("acceptance", "--acceptance", "none", False),
        ("speculative_tokens", "--speculative-tokens", "0", False),
        ("hot", "--hot", "f16:4096", False),
        ("keep", "--keep", "1", False),
        ("keep_first", "--keep-first", "4", False),
        ("keep_recent", "--keep-recent", "128", False),
        ("state_dtype", "--state-dtype", "f32", False),
        ("images", "--images", "1", False),
        ("offload", "--offload", "0", False)),
    "vLLM": (
        ("gpu_memory_utilization", "--gpu-memory-utilization", "whole card", False),
        ("max_num_batched_tokens", "--max-num-batched-tokens", "the engine's", False),
        ("block_size", "--block-size", "64, or the backend's", False),
        ("kv_cache_dtype_skip_layers", "--kv-cache-dtype-skip-layers", "none", False),
        ("enforce_eager", "--enforce-eager", "", True),
        ("no_prefix_caching", "--no-enable-prefix-caching", "", True),
        ("no_extensible_kv_cache", "--no-enable-extensible-kv-cache", "", True),
        ("enable_extensible_kv_cache", "--enable-extensible-kv-cache", "", True),
        ("language_model_only", "--language-model-only", "", True),
        ("fully_sharded_loras", "--fully-sharded-loras", "", True)),
    "SGLang": (
        ("mem_fraction_static", "--mem-fraction-static", "the engine's", False),
        ("chunked_prefill_size", "--chunked-prefill-size", "the engine's", False),
        ("page_size", "--page-size", "1, or the backend's", False),
        ("max_total_tokens", "--max-total-tokens", "from memory", False),
        ("cuda_graph_max_bs_decode", "--cuda-graph-max-bs-decode", "by card size", False),
        ("cuda_graph_max_bs_prefill", "--cuda-graph-max-bs-prefill", "the chunk", False),
        ("disable_decode_cuda_graph", "--disable-decode-cuda-graph", "", True),
        ("disable_prefill_cuda_graph", "--disable-prefill-cuda-graph", "", True),
        ("enable_dp_lm_head", "--enable-dp-lm-head", "", True),
        ("moe_a2a_backend", "--moe-a2a-backend", "none", False),
        ("swa_full_tokens_ratio", "--swa-full-tokens-ratio", "0.8", False),
        ("mamba_full_memory_ratio", "--mamba-full-memory-ratio", "0.9", False),
        ("max_mamba_cache_size", "--max-mamba-cache-size", "from the ratio", False),
        ("disable_radix_cache", "--disable-radix-cache", "", True),
        ("prefill_kv_cache_dequant_dtype", "--prefill-kv-cache-dequant-dtype", "by card",
         False)),
    "vLLM and SGLang": (
        ("attention_backend", "--attention-backend", "by model and card", False),),
    "TensorRT-LLM": (
        ("free_gpu_memory_fraction", "--kv-cache-free-gpu-memory-fraction", "0.9", False),
        ("tokens_per_block", "tokens_per_block", "32", False),
        ("max_num_tokens", "--max_num_tokens", "8192", False)),
    # Ollama reads these as num_batch, OLLAMA_FLASH_ATTENTION=0 and the LLAMA_ARG_* variables
    # its llama-server inherits (engines/ollama.py)
    "llama.cpp and Ollama": (
        ("ubatch", "-ub", "512", False),
        ("fit_target", "--fit-target MiB", "1024", False),
        ("swa_full", "--swa-full", "", True),
        ("kv_unified", "--kv-unified", "", True),
        ("no_flash_attn", "-fa off", "", True)),
    "llama.cpp": (
        ("no_mmproj", "no --mmproj", "", True),),
    "Ollama": (
        ("sched_spread", "OLLAMA_SCHED_SPREAD", "", True),),
}
SETTING_FIELDS = tuple(name for group in SETTINGS.values() for name, *_ in group)
#: the form's check boxes: the settings' and --enable-lora (in the LoRA group)
SWITCHES = (*(name for group in SETTINGS.values() for name, _, _, on in group if on),
            "enable_lora")
DEFAULTS.update(dict.fromkeys((*SETTING_FIELDS, "enable_lora"), ""))
LINK_DEFAULTS.update(dict.fromkeys((*SETTING_FIELDS, "enable_lora"), ""))
FIELDS = tuple(DEFAULTS)
#: the fields that say which cards and how the model is laid over them
CARD_FIELDS = ("gpu", "gpus", "tp", "pp", "dp")
#: the form's LoRA fields: any of them given turns --enable-lora on
LORA_FIELDS = ("max_loras", "max_lora_rank", "lora_target_modules")
#: what a link may name: the form's fields, the API's one format for K and V, its --cpu-moe
#: switch (the form's n_cpu_moe "all"), and a launch command: every field /api/v1/plan takes
#: in a query string
LINK_FIELDS = (*FIELDS, "kv", "cpu_moe", "command", "options")


_URL = re.compile(r"https?://[^\s),;]+")


def linked(text: str) -> Markup:
    """``text`` escaped, each web address in it a link that shows only its site (the whole
    address is the link's target and its title), so that a column of sources stays narrow."""
    out, end = [], 0
    for m in _URL.finditer(text):
        url = m.group(0).rstrip(".")
        site = url.split("/")[2].removeprefix("www.")
        out += [str(escape(text[end:m.start()])),
                f'<a href="{escape(url)}" title="{escape(url)}">{escape(site)}</a>']
        end = m.start() + len(url)
    out.append(str(escape(text[end:])))
    return Markup("".join(out))


def code_spans(text: str) -> Markup:
    """``text`` escaped, its ``double-backquoted`` spans as code."""
    return Markup(re.sub(r"``(.+?)``", r"<code>\1</code>", str(escape(text)), flags=re.S))


def breakable(text: object) -> Markup:
    """``text`` escaped, with a break opportunity after each underscore, dot, slash and
    backslash, so that a long identifier or pattern wraps in a narrow column."""
    return Markup(re.sub(r"([_./\\])", r"\1<wbr>", str(escape(str(text)))))


@cache
def templates() -> Jinja2Templates:
    t = Jinja2Templates(directory=str(ROOT / "templates"))
    t.env.filters["bytes"] = lambda n: format_bytes(int(n), 2)
    t.env.filters["gib"] = lambda n: format_gib(int(n))
    t.env.filters["count"] = lambda n: f"{int(n):,}"
    t.env.filters["linked"] = linked
    t.env.filters["code_spans"] = code_spans
    t.env.filters["breakable"] = breakable
    # a check box is drawn checked for the words the page reads as on
    t.env.tests["on"] = lambda value: str(value).strip().lower() in _TRUE
    return t


def _choices() -> dict[str, Any]:
    return {
        "models": [e.id for e in kvcore.model_catalog()],
        "gpus": [g.id for g in kvcore.gpu_catalog()],
        "formats": kvcore.format_names(),
        "weight_formats": ["auto"] + [w.name for w in WEIGHT_FORMATS],
        "engines": engine_names(),
        # the form's fields a pasted config's post carries beside it (its own model aside)
        "carried_fields": tuple(k for k in FIELDS if k != "model"),
        "settings": SETTINGS,
    }


def _slider(context: str) -> float:
    try:
        return round(math.log2(max(1024, kvcore.parse_tokens(context))), 2)
    except KvplanError:
        return 17.0


def _render(request: Request, form: dict[str, str], config: dict[str, Any] | None,
            status: int = 200, refused: KvplanError | None = None) -> HTMLResponse:
    errors: dict[str, str] = {}
    view = None
    try:
        if refused is not None:
            raise refused
        if config is None and not form["model"].strip():
            raise InputError("give a model: a catalog id (see Models) or a Hub repo id "
                             "(owner/name)", field="model")
        spec = load_model(config) if config is not None else load_model(
            form["model"], allow_local=False)
        body = _settings_body(form)
        query = make_query(spec, context=form["context"], sequences=form["sequences"],
                           kv_k=form["kv_k"], kv_v=form["kv_v"],
                           weights=None if form["weights"] in ("", "auto") else form["weights"],
                           gpu=form["gpu"] or None,
                           gpus=form["gpus"] if form["gpus"] not in ("", "1") else None,
                           tp=form["tp"].strip() or None, pp=form["pp"].strip() or None,
                           dp=form["dp"].strip() or 1, attn_dp=form["attn_dp"].strip() or 1,
                           engine=form["engine"],
                           settings=engine_settings(body, **_placement(form, body)),
                           **cache_options(body))
        view = plan_view(query)
        view["verified"] = _verified(query)
        _plan_links(view, form)
    except KvplanError as exc:
        errors[_form_field(exc.field, form)] = str(exc)
        status = 422 if status == 200 else status
    partial = request.headers.get("HX-Request") == "true"
    context = {"form": form, "view": view, "api_link": _api_link(form, config), "errors": errors, "slider": _slider(form["context"]),
               "custom": config is not None, "partial": partial, **_choices()}
    name = "_result.html" if partial else "index.html"
    # htmx swaps only 2xx responses by default: a bad field is shown, not dropped
    return templates().TemplateResponse(request, name, context,
                                        status_code=200 if partial else status)


def _render_command(request: Request, params: Any) -> HTMLResponse:
    """The page planning a launch command (?command=llama-server …&gpu=4090): the plan
    /api/v1/command answers, the form filled with what the command sets, and how the
    command was read."""
    from pydantic import ValidationError

    from kvcore.command import cli_line

    from .api import command_query
    from .schemas import CommandIn

    command = str(params["command"])
    options = str(params.get("options", "")) or None
    form = {k: str(params.get(k, v))[:200] for k, v in LINK_DEFAULTS.items()}
    errors: dict[str, str] = {}
    view = None
    status = 200
    try:
        fault = _link_fault(params)
        if fault is not None:
            raise fault
        # the card is the page's; everything else is the command's
        given = {k: str(params[k]) for k in ("gpu", "gpus") if str(params.get(k, "")).strip()
                 and str(params[k]) != LINK_DEFAULTS[k]}
        try:
            body = CommandIn.model_validate({"command": command, "options": options,
                                             **given})
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(f"{err['loc'][0]}: {err['msg']}", field=str(err["loc"][0])
                             ) from None
        query, launch, fields = command_query(body)
        form.update({k: ",".join(fields[k]) if isinstance(fields[k], list) else str(fields[k])
                     for k in LINK_DEFAULTS if k in fields})
        if "kv" in fields:
            form["kv_k"] = form["kv_v"] = str(fields["kv"])
        for k in SWITCHES:
            form[k] = "true" if fields.get(k) else ""
        if fields.get("cpu_moe"):
            # llama-server's --cpu-moe is the form's n_cpu_moe "all"
            form["n_cpu_moe"] = "all"
        form["weights"] = str(fields.get("weights", "auto"))
        # the context planned: where the command leaves it to the engine (llama.cpp's --fit
        # shortening, Ollama's num_ctx by the cards) the engine's, not the form's default
        form["context"] = str(query.context)
        view = plan_view(query)
        view["verified"] = _verified(query)
        _plan_links(view, form)
        view["launch"] = {"read_as": cli_line(fields), "notes": launch.notes,
                          "unread": launch.unread, "unknown": launch.unknown}
    except KvplanError as exc:
        errors[_form_field(exc.field, form)] = str(exc)
        status = 422
    partial = request.headers.get("HX-Request") == "true"
    context = {"form": form, "view": view, "api_link": None, "errors": errors,
               "slider": _slider(form["context"]), "custom": False, "partial": partial,
               "command": command, "options": options or "", **_choices()}
    return templates().TemplateResponse(request, "_result.html" if partial else "index.html",
                                        context, status_code=200 if partial else status)


#: the /models page's question: which catalog models fit this card (its fields and defaults)
FIT_DEFAULTS = {"gpu": "", "context": "8k", "sequences": "1", "kv": "f16", "weights": "auto",
                "engine": "raw", "tp": "", "pp": "", "dp": "1", "attn_dp": "1"}
#: the /models fields that lay the model over the cards (blank or 1: the engine's layout)
FIT_LAYOUT = ("tp", "pp", "dp", "attn_dp")


def _fit_form(request: Request) -> dict[str, str]:
    return {k: str(request.query_params.get(k, v)).strip() or v
            for k, v in FIT_DEFAULTS.items()}


def _fit_layout(fit: dict[str, str]) -> str:
    """The layout the /models page was given, as its heading says it (" as tp 2 × pp 2",
    " with attention dp 8"; "" for the engine's own)."""
    sizes = " × ".join(f"{k} {fit[k]}" for k in ("tp", "pp", "dp") if fit[k] != FIT_DEFAULTS[k])
    groups = fit["attn_dp"] if fit["attn_dp"] != FIT_DEFAULTS["attn_dp"] else ""
    if sizes:
        return f" as {sizes}" + (f" (attention dp {groups})" if groups else "")
    return f" with attention dp {groups}" if groups else ""


def _find_model(fit: dict[str, str],
                entries: Sequence[kvcore.CatalogEntry] | None = None) -> dict[str, Any]:
    """The /models page's answer: kvcore.query.find_model under the page's fields (over
    ``entries``, the models a search found, where given), each row with a link to its plan on
    the planner page."""
    from kvcore.query import find_model, host_runnable

    weights = None if fit["weights"] == "auto" else fit["weights"]
    found = find_model(lambda spec: make_query(
        spec, context=fit["context"], sequences=fit["sequences"], kv=fit["kv"],
        weights=weights, gpu=fit["gpu"], engine=fit["engine"], tp=fit["tp"] or None,
        pp=fit["pp"] or None, dp=fit["dp"], attn_dp=fit["attn_dp"]), entries)
    link = {"gpu": fit["gpu"], "context": fit["context"], "sequences": fit["sequences"],
            "kv_k": fit["kv"], "kv_v": fit["kv"], "weights": fit["weights"],
            "engine": fit["engine"],
            # the layout, where given, as the planner page's fields
            **{k: fit[k] for k in FIT_LAYOUT if fit[k] != FIT_DEFAULTS[k]}}
    for rows in found.values():
        for r in rows:
            r["link"] = "/?" + urlencode({"model": r["model"], **link})
    return {**found, "host": host_runnable(found)}


def _whole(form: dict[str, str], name: str, what: str) -> int | None:
    text = form[name].strip()
    if not text:
        return None
    if not text.isdigit():
        raise InputError(f"{name} must be a whole number of {what}, got {shown(text)}",
                         field=name)
    return int(text)


#: a switch's values, as the API reads them from a query string (blank: off)
_TRUE = frozenset({"true", "1", "on", "yes", "y", "t"})
_FALSE = frozenset({"", "false", "0", "off", "no", "n", "f"})


def _on(value: str, name: str) -> bool:
    """A switch's value (a check box sends true): another word is refused as the API refuses
    it, not taken for on."""
    word = value.strip().lower()
    if word not in _TRUE | _FALSE:
        raise InputError(f"{name}: Input should be a valid boolean, unable to interpret input "
                         f"{shown(value)} (true or false)", field=name)
    return word in _TRUE


def _settings_body(form: dict[str, str]) -> Any:
    """The form's engine and cache settings as the API reads them (blanks left out: their
    defaults; a switch is on when given at all but as "false"), checked as the API checks
    them."""
    from pydantic import ValidationError

    from .schemas import PlanQueryIn
    from .web import validation_message

    given = {k: str(_on(form[k], k)).lower() if k in SWITCHES else form[k].strip()
             for k in SETTING_FIELDS if form[k].strip()}
    try:
        return PlanQueryIn.model_validate(given)
    except ValidationError as exc:
        _, message, field = validation_message(exc.errors())
        raise InputError(message, field=field) from None


def _placement(form: dict[str, str], body: Any) -> dict[str, Any]:
    """The placement fields as engine settings (blank: the engine's default): llama.cpp's ngl
    (layers on the card), n_cpu_moe (blocks whose experts stay in host memory, or "all":
    --cpu-moe), override_tensor (-ot PATTERN=CPU, several at commas), tensor_split (-ts: each card's share of the layers), the host's bandwidth and
    link in GB/s, its memory as a size, llama-server's cache_ram (MiB; -1 no limit) and
    ctx_checkpoints; vLLM's and SGLang's cpu_offload_gb (GiB of each rank's weights in host
    memory); vLLM's and SGLang's LoRA slots (max_loras, max_lora_rank, lora_target_modules:
    any of them turns --enable-lora on, as the enable_lora box does; ``body``'s
    fully_sharded_loras shapes them)."""
    cpu_moe = form["n_cpu_moe"].strip().lower()
    memory = form["host_memory"].strip()
    shares = form["tensor_split"].strip()
    return dict(
        cpu_offload_bytes=gib_bytes(form["cpu_offload_gb"], "cpu_offload_gb"),
        tensor_split=parse_tensor_split(shares) if shares else None,
        n_gpu_layers=_whole(form, "ngl", "layers"),
        n_cpu_moe=CPU_MOE if cpu_moe == "all" else _whole(form, "n_cpu_moe", "blocks (or all)"),
        override_tensor=split_overrides([form["override_tensor"]]),
        host_bandwidth_bytes_per_s=_rate(form, "host_bandwidth"),
        host_link_bytes_per_s=_rate(form, "host_link"),
        host_memory_bytes=kvcore.parse_bytes(memory, field="host_memory") if memory else None,
        cache_ram_mib=(-1 if form["cache_ram"].strip() == "-1"
                       else _whole(form, "cache_ram", "MiB (or -1: no limit)")),
        ctx_checkpoints=_whole(form, "ctx_checkpoints", "checkpoints a slot"),
        lora=lora_from(_on(form["enable_lora"], "enable_lora") or any(form[k].strip() for k in LORA_FIELDS),
                       _whole(form, "max_loras", "adapter slots"),
                       _whole(form, "max_lora_rank", "rank"), body.fully_sharded_loras,
                       targets=form["lora_target_modules"].strip() or None))


def _rate(form: dict[str, str], name: str) -> float | None:
    """A GB/s field as bytes a second (None where blank)."""
    text = form[name].strip()
    if not text:
        return None
    try:
        gbps = float(text)
    except ValueError:
        gbps = math.nan
    if not math.isfinite(gbps):
        raise InputError(f"{name} must be a number of GB/s, got {shown(text)}", field=name)
    return gbps * 1e9


def _plan_links(view: dict[str, Any], form: dict[str, str]) -> None:
    """Links to this plan with one change, each from the form's fields that differ from a
    link's defaults: for each card that fits (a plan without a card), the plan on it; for
    the "to fit" line, the plan with its change."""
    base = {k: v for k, v in form.items() if v.strip() and v != LINK_DEFAULTS.get(k)}
    # a card that fits was found in the form's layout (its tp, pp, dp: as many cards as they
    # ask), so its link keeps them; more cards "to fit" are laid out as the engine lays them
    # over that count, so that link leaves them out
    uncarded = {k: v for k, v in base.items() if k not in CARD_FIELDS}
    for r in view.get("cards") or ():
        groups = r.get("attn_dp", 1)
        r["link"] = "/?" + urlencode({**{k: v for k, v in base.items() if k not in ("gpu", "gpus")},
                                      "gpu": r["gpu_field"],
                                      **({"attn_dp": str(groups)} if groups > 1 else {})})
    for key in ("to_fit", "to_fit_or"):
        change = view.get(f"{key}_fields")
        if change:
            view[f"{key}_link"] = "/?" + urlencode(
                {**(uncarded if "gpus" in change else base), **change})


def _api_link(form: dict[str, str], config: dict[str, Any] | None) -> str | None:
    """The same plan from /api/v1/plan: the form's fields, blanks left out (the API refuses
    an empty field; its cpu_moe is the page's n_cpu_moe "all"); None for a pasted config,
    which a link cannot carry."""
    if config is not None:
        return None
    fields = {k: v for k, v in form.items() if v.strip() and not (k == "gpus" and v == "1")}
    if fields.get("n_cpu_moe", "").strip().lower() == "all":
        del fields["n_cpu_moe"]
        fields["cpu_moe"] = "true"
    if any(k in fields for k in LORA_FIELDS):
        fields["enable_lora"] = "true"
    return "/api/v1/plan?" + urlencode(fields)


def _page_fault(params: Any, takes: Sequence[str]) -> KvplanError | None:
    """What is wrong with the query string of a page of lists (/gpus, /models): a field given
    twice, or one the page does not take, which it would drop and answer another question."""
    twice = repeated_field(params.multi_items())
    if twice is not None:
        return twice
    other = next((k for k in params if k not in takes), None)
    if other is None:
        return None
    hint = nearest(other, takes)
    return InputError(f"{shown(other)} is not a field of this page" +
                      (f" (did you mean {hint}?)" if hint else "") +
                      f"; it takes {', '.join(takes)}", field=other)


def _link_fault(params: Any) -> KvplanError | None:
    """What is wrong with a link's query string beyond its values: a field given twice, or a
    name the page does not take (dropped, it would plan another question than the link's)."""
    twice = repeated_field(params.multi_items())
    if twice is not None:
        twice.field = "kv_k" if twice.field == "kv" else twice.field
        return twice
    unknown = [k for k in params if k not in LINK_FIELDS]
    if unknown:
        hint = ({"ctx": "context", "seqs": "sequences"}.get(unknown[0])
                or nearest(unknown[0], LINK_FIELDS))
        # a near name is the answer; the whole list (some 80 fields) only where none is near
        takes = ("" if hint else "; it takes " + ", ".join(LINK_FIELDS) +
                 " (/api/v1/plan takes every CLI option)")
        return InputError(
            f"{shown(unknown[0])} is not a field of this page" +
            (f" (did you mean {hint}?)" if hint else "") + takes,
            field=unknown[0] if unknown[0] in FIELDS else "model")
    return None


def _default_format(engine: str) -> str:
    """The form's KV format where the page's link names none: DEFAULTS' where the engine has
    it, else f16 (an engine without q8_0 has f16)."""
    try:
        offered = supported_formats(engine)
    except KvplanError:
        # an unknown engine: the form says so next to the field
        return DEFAULTS["kv_k"]
    return DEFAULTS["kv_k"] if offered is None or DEFAULTS["kv_k"] in offered else "f16"


def _verified(query: Any) -> str | None:
    """'verified on <card>: predicted X, allocated Y' when this exact plan was measured."""
    from .common import verified
    from .settings import get_settings

    found = verified(query, get_settings().db_path)
    return found["line"] if found else None


def _form_field(field: str | None, form: dict[str, str]) -> str:
    """The form's field an error is shown beside: LoRA turned on by a slot field (the box
    unchecked), beside that field."""
    if field == "enable_lora" and form["enable_lora"].strip().lower() not in _TRUE:
        return next((k for k in LORA_FIELDS if form[k].strip()), "enable_lora")
    mapping = {"kv": "kv_k", "config": "model", None: "model", "command": "command",
               "cpu_moe": "n_cpu_moe"}
    return mapping.get(field, field or "model")


def pages_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/", response_class=HTMLResponse)
    def index(request: Request) -> HTMLResponse:
        params = request.query_params
        if not params:
            form = dict(DEFAULTS)
            form["kv_k"] = form["kv_v"] = _default_format(form["engine"])
            return _render(request, form, None)
        if str(params.get("command", "")).strip():
            return _render_command(request, params)
        form = {k: str(params.get(k, v))[:200] for k, v in LINK_DEFAULTS.items()}
        if "kv" in params:
            # the API's and the CLI's one format for K and V; kv_k or kv_v beside it wins
            form["kv_k"] = str(params.get("kv_k", params["kv"]))[:200]
            form["kv_v"] = str(params.get("kv_v", params["kv"]))[:200]
        refused = _link_fault(params)
        try:
            cpu_moe = refused is None and _on(str(params.get("cpu_moe", "")), "cpu_moe")
        except InputError as exc:
            refused, cpu_moe = exc, False
        if cpu_moe:
            # the API's --cpu-moe is the form's n_cpu_moe "all"; beside a block count it wins,
            # as in the API, the CLI and llama-server (every block's experts in host memory)
            form["n_cpu_moe"] = "all"
        return _render(request, form, None, refused=refused)

    @router.post("/", response_class=HTMLResponse)
    async def index_post(request: Request) -> HTMLResponse:
        # a pasted config is one form field: let it be as large as a config may be
        data = await request.form(max_part_size=MAX_CONFIG_BYTES + 1)
        # the page's fields (sent beside the config by htmx), else the copies the config form
        # holds for a browser without JavaScript, else the CLI's defaults
        # (with htmx the page's own fields come, an unchecked box by its absence: the copies,
        # as the page was drawn, would turn it on again)
        copies = not request.headers.get("HX-Request")
        form = {k: str(data.get(k, data.get(f"page_{k}", v) if copies else v))[:200]
                for k, v in LINK_DEFAULTS.items()}
        config = None
        upload = data.get("config_file")
        text = data.get("config")
        try:
            if isinstance(upload, UploadFile) and upload.filename:
                raw = await upload.read(MAX_CONFIG_BYTES + 1)
                config = parse_config_text(raw, "uploaded config.json")
            elif isinstance(text, str) and text.strip():
                config = parse_config_text(text, "pasted config")
        except KvplanError as exc:
            return templates().TemplateResponse(
                request, "_result.html" if request.headers.get("HX-Request") else "index.html",
                {"form": form, "view": None, "errors": {"model": str(exc)},
                 "slider": _slider(form["context"]), "custom": True,
                 "partial": bool(request.headers.get("HX-Request")), **_choices()},
                status_code=200 if request.headers.get("HX-Request") else 422)
        return _render(request, form, config)

    @router.get("/models", response_class=HTMLResponse)
    def models(request: Request) -> HTMLResponse:
        search = (request.query_params.get("q") or "").strip()
        search_error = None
        entries: Sequence[kvcore.CatalogEntry] = kvcore.model_catalog()
        if search:
            try:
                entries = find_models(search, field="the search")
            except KvplanError as exc:
                search_error = str(exc)
        rows = [model_entry(entry) for entry in entries]
        fit, found, error = _fit_form(request), None, None
        fault = _page_fault(request.query_params, (*FIT_DEFAULTS, "q"))
        if fault is not None:
            error = str(fault)
        elif fit["gpu"] and not search_error:
            try:
                found = _find_model(fit, entries if search else None)
            except KvplanError as exc:
                error = str(exc)
        return templates().TemplateResponse(
            request, "models.html",
            {"rows": rows, "fit": fit, "found": found, "error": error,
             "layout": _fit_layout(fit), "search": search, "search_error": search_error,
             "search_miss": (why_unmatched(search) if search and not rows and not search_error
                             else None),
             # each form carries the other's fields: a search keeps the fit asked, and back
             "asked": {k: v for k, v in fit.items() if fit["gpu"] and v != FIT_DEFAULTS[k]},
             "catalog_size": len(kvcore.model_catalog()), **_choices()},
            status_code=422 if error or search_error else 200)

    @router.get("/models/{model_id:path}", response_class=HTMLResponse)
    def model(request: Request, model_id: str) -> HTMLResponse:
        try:
            spec = load_model(model_id, allow_local=False, allow_hub=False)
        except KvplanError as exc:
            return templates().TemplateResponse(request, "error.html", {"error": str(exc)},
                                                status_code=404)
        entry = next((e for e in kvcore.model_catalog() if e.id == spec.name), None)
        per_format = [{"name": f.name, "bits": f.bits_per_value,
                       "bytes_per_token": kvcore.bytes_per_token(spec, CacheOptions(kv_k=f, kv_v=f)),
                       "marginal": kvcore.marginal_bytes_per_token(spec,
                                                                   CacheOptions(kv_k=f, kv_v=f)),
                       "engines": engine_flags(f.name)}
                      for f in kvcore.FORMATS]
        state = kvcore.cache_size(spec, 1, 1).state_bytes
        head = None
        if entry is not None and entry.head_of:
            from kvcore.draft import TITLES, head_method, head_params

            head = {"title": TITLES[head_method(spec)], "of": entry.head_of,
                    "params": head_params(spec)}
        return templates().TemplateResponse(request, "model.html", {
            "spec": spec, "entry": entry, "per_format": per_format, "state": state,
            "head": head})

    @router.get("/measurements", response_class=HTMLResponse)
    def measurements(request: Request) -> HTMLResponse:
        from kvcore.store import list_measurements

        from .settings import get_settings

        try:
            rows = [{"allocator_bytes": None, "driver_bytes": None, "decode": {}, "env": {}, **r}
                    for r in list_measurements(get_settings().db_path, bundled=True)]
        except KvplanError as exc:
            return templates().TemplateResponse(request, "error.html", {"error": str(exc)},
                                                status_code=500)
        return templates().TemplateResponse(request, "measurements.html", {"rows": rows})

    @router.get("/api", response_class=HTMLResponse)
    def api_reference(request: Request) -> HTMLResponse:
        from .apidoc import reference

        return templates().TemplateResponse(request, "api.html",
                                            {"ref": reference(request.app.openapi())})

    @router.get("/gpus", response_class=HTMLResponse)
    def gpus(request: Request, vendor: str = "", min_memory: str = "",
             engine: str = "", segment: str = "") -> HTMLResponse:
        # the form's empty fields are no filter
        chosen = {"vendor": vendor.strip(), "min_memory": min_memory.strip(),
                  "engine": engine.strip(), "segment": segment.strip()}
        try:
            fault = _page_fault(request.query_params, tuple(chosen))
            if fault is not None:
                raise fault
            cards = gpu_list(chosen["vendor"] or None, chosen["min_memory"] or None,
                             chosen["engine"] or None, segment=chosen["segment"] or None)
        except KvplanError as exc:
            return templates().TemplateResponse(request, "error.html", {"error": str(exc)},
                                                status_code=422)
        return templates().TemplateResponse(request, "gpus.html", {
            "gpus": cards, "vendors": kvcore.gpus.VENDORS, "chosen": chosen,
            "segments": kvcore.gpus.SEGMENTS,
            "engine_titles": {e: t for e, t in ENGINE_TITLES.items() if e != "raw"},
            "total": len(kvcore.gpu_catalog()),
            "engines": {g.id: [ENGINE_TITLES[e] for e in engines_on(g)] for g in cards}})

    return router
