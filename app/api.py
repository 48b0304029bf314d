"""The REST API under /api/v1: same answers as ``kvplan --json``."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

import kvcore
from kvcore import CacheOptions, load_model
from kvcore.catalog import find_models, unmatched
from kvcore.command import Launch, cli_line, give_way, launch_query, read_command, resolve
from kvcore.engines import EngineSettings
from kvcore.formats import describe
from kvcore.model import ModelSpec
from kvcore.query import Query as PlanQuery
from kvcore.query import (
    find_draft,
    find_format_listing,
    find_gpu_for,
    find_model,
    find_weights,
)

from .common import (
    answered,
    check_find_format,
    check_find_gpu,
    check_find_model,
    check_find_weights,
    gpu_entry,
    gpu_list,
    make_query,
    model_entry,
    repeated_field,
    settings_from,
)
from .schemas import (
    CommandIn,
    ErrorOut,
    FindGpuIn,
    GpuListIn,
    MeasureIn,
    ModelListIn,
    PlanIn,
    PlanQueryIn,
)
from .settings import get_settings

__all__ = ["api_router", "command_query", "run_plan", "to_query"]

#: every error answers in one shape
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text} for code, text in (
        (400, "malformed body"), (401, "missing or wrong token"),
        (403, "switched off on this server"),
        (404, "unknown model"), (409, "busy"), (413, "body too large"),
        (422, "invalid input, naming the field"), (504, "time limit"),
        (507, "GPU out of memory"))}

#: one measurement at a time on this server
_MEASURE_LOCK = threading.Lock()


def to_query(body: PlanIn, spec: ModelSpec | None = None) -> PlanQuery:
    """The kvcore Query of an API body (of ``spec`` instead of the body's model, where one is
    given). Never reads a local path."""
    if body.config is not None and body.model:
        raise kvcore.InputError("give a model or a config, not both", field="config")
    if spec is None and body.config is not None:
        try:
            spec = load_model(body.config)
        except kvcore.KvplanError as exc:
            # the fault is in the config object: its key is in the message
            exc.field = "config"
            raise
    elif spec is None and body.model:
        spec = load_model(body.model, allow_local=False)
    elif spec is None:
        raise kvcore.InputError("give a model (catalog or Hub repo id) or a config object",
                                field="model")
    return make_query(
        spec, context=body.context if "context" in body.model_fields_set else None,
        sequences=body.sequences, kv=body.kv, kv_k=body.kv_k,
        kv_v=body.kv_v, weights=body.weights, gpu=body.gpu, gpus=body.gpus, tp=body.tp,
        pp=body.pp, dp=body.dp, attn_dp=body.attn_dp, engine=body.engine,
        settings=engine_settings(body),
        **cache_options(body))


def cache_options(body: PlanIn) -> dict[str, Any]:
    """make_query's arguments beyond the model, context, cards, formats and engine."""
    return {"hot": body.hot, "keep": body.keep, "keep_first": body.keep_first,
            "keep_recent": body.keep_recent, "state_dtype": body.state_dtype,
            "images": body.images, "mtp": body.mtp, "no_mmproj": body.no_mmproj,
            "kv_budget": body.kv_budget, "overhead": body.overhead,
            "gpu_limit": body.gpu_limit, "draft": body.draft,
            "draft_weights": body.draft_weights, "draft_local": False,
            "draft_method": body.draft_method,
            "acceptance": body.acceptance}


def engine_settings(body: PlanIn, **given: Any) -> EngineSettings:
    """The engine's settings of a request; ``given`` (EngineSettings' own names) wins over
    the body's (the page's placement and LoRA fields)."""
    return settings_from(body, **given)


def command_query(body: CommandIn) -> tuple[PlanQuery, Launch, dict[str, Any]]:
    """The Query of a launch command (its fields, the body's own fields winning), the
    command as read, and the plan's fields (``cli_line`` writes them as a kvplan command)."""
    launch = read_command(body.command, body.options)
    spec, fields = resolve(launch, body.model, allow_local=False,
                           weights_given="weights" in body.model_fields_set)
    for path in fields.pop("lora", ()):
        # an adapter file is on the machine that runs the command, which the server is not
        launch.notes.append(f"--lora {path}: the adapter's tensors are not counted (the server "
                            "reads no local file; `kvplan --cmd` where the file is counts "
                            "them)")
    given = body.model_fields_set - {"command", "model", "options"}
    give_way(launch, fields, given)
    fields.update({k: getattr(body, k) for k in given})
    try:
        plan = PlanIn.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err.get("loc") else "command"
        raise kvcore.InputError(f"{name} read from the command: {err['msg']}",
                                field="command") from None
    return launch_query(launch, to_query(plan, spec)), launch, fields


def run_plan(body: PlanIn) -> dict[str, Any]:
    """Same request, same JSON as ``kvplan --json`` (with ``verified`` when this exact plan
    was measured)."""
    return answered(to_query(body), get_settings().db_path)


def known_query(request: Request) -> None:
    """A query parameter a route does not read is named, as a repeated one is: a POST takes
    its fields in its JSON body (POST /plan?context=128k had planned 8k), and a GET that takes
    none (/formats, /models/{id}) would answer as if it were not there. Routes whose query is
    a model of fields refuse others themselves."""
    if not request.query_params:
        return
    twice = repeated_field(request.query_params.multi_items())
    if twice:
        raise twice
    route = request.scope.get("route")
    params = route.dependant.query_params if isinstance(route, APIRoute) else []
    if any(isinstance(p.field_info.annotation, type)
           and issubclass(p.field_info.annotation, BaseModel) for p in params):
        return
    allowed = [p.alias for p in params]
    other = next((k for k in request.query_params if k not in allowed), None)
    if other is None:
        return
    takes = f"; it takes only {', '.join(allowed)} there" if allowed else ""
    where = ("a POST takes its fields in its JSON body" if request.method == "POST"
             else f"{request.url.path} takes no query parameters")
    raise kvcore.InputError(f"{other} in the query string: {where}{takes}", field=other)


def api_router() -> APIRouter:
    api = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES,
                    dependencies=[Depends(known_query)])

    @api.get("/healthz", summary="Liveness and version")
    def healthz() -> dict[str, Any]:
        """``{"ok": true, "version": …}`` while the server answers."""
        return {"ok": True, "version": kvcore.__version__}

    @api.post("/plan", summary="Plan a model on a card (JSON body)")
    def post_plan(body: PlanIn) -> dict[str, Any]:
        """The cache per layer kind (K and V apart), weights, overhead, the fit (max context
        for the sequences, max sequences for the context), what binds, the engine's
        accounting and command, and the decode and prefill estimates: what ``kvplan --json``
        prints for the same fields."""
        return run_plan(body)

    @api.get("/plan", summary="Plan a model on a card (query parameters)")
    def get_plan(q: Annotated[PlanQueryIn, Query()]) -> dict[str, Any]:
        """``POST /plan``'s answer, its fields as query parameters (each given once:
        known_query refuses a repeated one)."""
        return run_plan(q)

    @api.post("/find-gpu", summary="Which cards fit this plan")
    def post_find_gpu(body: FindGpuIn) -> list[dict[str, Any]]:
        """The catalog cards that fit the body's model, context and sequences, each at the
        fewest cards that fit (up to 10, least total memory first), with the max context and
        decode estimate there: ``kvplan --find-gpu``; ``vendor``: one maker's cards only,
        ``segment``: one kind of card (laptop) only."""
        check_find_gpu(gpu=body.gpu, gpus=body.gpus, tp=body.tp, pp=body.pp,
                       kv_budget=body.kv_budget, dp=body.dp, attn_dp=body.attn_dp)
        return find_gpu_for(to_query(body), vendor=body.vendor, segment=body.segment)

    @api.post("/find-model", summary="Which catalog models fit this card")
    def post_find_model(body: PlanIn, q: Annotated[str | None, Query(
            max_length=200, examples=["qwen3 coder"],
            description="only the catalog models every word names, as GET /models?q= "
                        "keeps them")] = None) -> dict[str, Any]:
        """Every catalog model on the body's card: those that fit (most parameters first),
        those trained for fewer positions, those that fit a shorter context, those too big,
        and those refused with the reason; ``?q=`` keeps the models its words name."""
        given = "model" if body.model else "config" if body.config is not None else None
        check_find_model(given=given, gpu=body.gpu, gpus=body.gpus, kv_budget=body.kv_budget,
                         field=given or "model", draft=body.draft)
        entries = None if q is None else find_models(q)
        if q is not None and not entries:
            raise kvcore.InputError(f"{unmatched(q)}; GET /api/v1/models?q= lists what a "
                                    "search finds", field="q")
        return find_model(lambda spec: to_query(body, spec), entries)

    @api.post("/find-format", summary="Which KV formats fit, with their quality")
    def post_find_format(body: PlanIn) -> list[dict[str, Any]]:
        """Every KV format on the body's model and card: bytes a token, whether it fits, max
        context and sequences, decode estimate and measured quality: ``kvplan
        --find-format``. Formats the engine has but refuses for this plan follow, each with
        ``offered`` false and the reason in ``refused``."""
        check_find_format(kv=body.kv, kv_k=body.kv_k, kv_v=body.kv_v)
        return find_format_listing(to_query(body))

    @api.post("/find-weights", summary="Which weight formats fit")
    def post_find_weights(body: PlanIn) -> list[dict[str, Any]]:
        """Every weight format the engine loads (llama.cpp: each llama-quantize type),
        largest first: its bytes on this model, fit, max context, decode estimate, the
        perplexity llama-quantize lists for it, and under llama.cpp what --fit would keep in
        host memory where it does not fit the card."""
        check_find_weights(weights=body.weights)
        return find_weights(to_query(body))

    @api.post("/find-draft", summary="Which catalog models can be the draft")
    def post_find_draft(body: PlanIn) -> dict[str, Any]:
        """The catalog models of the body's model's vocabulary size, attention layers only
        and at most a quarter of its parameters, each planned as its draft on the body's card
        (``draft_weights`` their weight format; with ``acceptance`` the speculative decode
        estimate and speed-up): ``drafts``, those that fit first, those of the model's own
        family first; ``refused`` with the engine's reason: ``kvplan --find-draft``."""
        plain = body.model_copy(update={"draft_weights": None, "acceptance": None})
        return find_draft(to_query(plain), body.draft_weights, body.acceptance)

    @api.post("/command", summary="Plan an engine's launch command")
    def post_command(body: CommandIn) -> dict[str, Any]:
        """A serving engine's launch command planned as given (llama-server, vllm serve,
        python -m sglang.launch_server, trtllm-serve, ollama serve or run with its OLLAMA_*
        variables): the plan's JSON, as ``/plan`` answers
        it, with ``command``: the engine, the kvplan command line it reads as, notes on
        what was assumed, the flags left unread (``unread``: known to change no memory kvplan
        plans) and those kvplan does not know (``unknown``)."""
        query, launch, fields = command_query(body)
        data = answered(query, get_settings().db_path)
        data["command"] = {"engine": launch.engine, "read_as": cli_line(fields),
                           "notes": launch.notes, "unread": launch.unread,
                           "unknown": launch.unknown}
        return data

    @api.get("/measurements", summary="Caches measured on a GPU")
    def measurements() -> list[dict[str, Any]]:
        """Every cache ``kvplan measure`` built with kvplan's kernels, this server's and the
        bundled H200 runs: predicted bytes against the tensors', the allocator's and the
        driver's, and the decode step's time and read bandwidth."""
        from kvcore.store import list_measurements

        return list_measurements(get_settings().db_path, bundled=True)

    @api.post("/measure", response_model=None, summary="Measure a cache on this server's GPU")
    def post_measure(body: MeasureIn,
                     authorization: Annotated[str | None, Header(
                         description="Bearer TOKEN, where the server sets "
                                     "KVPLAN_MEASURE_TOKEN")] = None) -> Any:
        """Allocate the plan's cache with kvplan's kernels on this server's GPU and compare
        the memory with the prediction (``kvplan measure``). Off unless the server allows it
        (KVPLAN_ALLOW_MEASURE=1, or KVPLAN_MEASURE_TOKEN and a bearer token); one at a
        time."""
        settings = get_settings()
        if not settings.measure_enabled:
            return _err(403, "measurement is off on this server (start it with "
                             "KVPLAN_ALLOW_MEASURE=1 or KVPLAN_MEASURE_TOKEN)")
        if settings.measure_token and authorization != f"Bearer {settings.measure_token}":
            return _err(401, "measurement needs Authorization: Bearer <token>", "authorization")
        load_model(body.model, allow_local=False)  # a clear 4xx before any GPU work
        if not _MEASURE_LOCK.acquire(timeout=1):
            return _err(409, "a measurement is already running; one at a time, try again later")
        try:
            return _run_measure(body, settings.measure_timeout_s, str(settings.db_path))
        finally:
            _MEASURE_LOCK.release()

    @api.get("/models", summary="The bundled model catalog")
    def models(q: Annotated[ModelListIn, Query()]) -> list[dict[str, Any]]:
        """Each catalog model: its id, Hub repository, family, parameters, layers and their
        kinds, f16 K + V bytes a token (within its windows and past them), trained positions,
        the config's source and the repositories that share its config; ``q`` keeps the models
        each of its words names."""
        entries = kvcore.model_catalog() if q.q is None else find_models(q.q)
        return [model_entry(e, sources=True) for e in entries]

    @api.get("/models/{model_id:path}", summary="One model: layer kinds and bytes a token")
    def model(model_id: Annotated[str, Path(
            description="a catalog id (/api/v1/models), or the Hub repository of a catalog "
                        "model or of one that shares its config")]) -> dict[str, Any]:
        """A catalog model's layers by kind, parameters, and bytes a token in every KV format
        (within its windows and past them) and recurrent state a sequence."""
        spec = load_model(model_id, allow_local=False, allow_hub=False)
        summary = kvcore.model_summary(spec)
        summary["bytes_per_token"] = {f.name: kvcore.bytes_per_token(spec, CacheOptions(
            kv_k=f, kv_v=f)) for f in kvcore.FORMATS}
        # what each token past every sliding or chunked window adds (the full layers' rows),
        # and the recurrent state a sequence holds whatever its length
        summary["marginal_bytes_per_token"] = {f.name: kvcore.marginal_bytes_per_token(
            spec, CacheOptions(kv_k=f, kv_v=f)) for f in kvcore.FORMATS}
        summary["state_bytes_per_sequence"] = kvcore.cache_size(spec, 1, 1).state_bytes
        return summary

    @api.get("/gpus", summary="The bundled GPU catalog")
    def gpus(q: Annotated[GpuListIn, Query()]) -> list[dict[str, Any]]:
        """Each card's memory, peak bandwidth, dense FP16/BF16 matrix peak and host link,
        with their sources; ``vendor``, ``min_memory``, ``engine`` and ``segment`` keep only
        the cards that match."""
        return [gpu_entry(g, sources=True)
                for g in gpu_list(q.vendor, q.min_memory, q.engine, segment=q.segment)]

    @api.get("/formats", summary="The KV-cache formats")
    def formats() -> list[dict[str, Any]]:
        """Each KV format's block (values and bytes), bits a value, the bytes of a 128-wide
        head's K and V rows, layout and quality note."""
        return [describe(f) for f in kvcore.FORMATS]

    @api.get("/weights", summary="The weight formats")
    def weights() -> list[dict[str, Any]]:
        """Each weight format kvplan sizes (llama.cpp's quantization types among them): its
        names, bits a weight and description."""
        from kvcore.weights import weight_format_list

        return weight_format_list()

    return api




def _err(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message, "status": status, "field": field},
                        status_code=status)


def _run_measure(body: MeasureIn, timeout_s: int, db: str) -> Any:
    """Run ``kvplan measure`` in a child process: a time limit, and all GPU memory released
    when it ends, whatever happens."""
    cmd = [sys.executable, "-m", "app.cli", "measure", body.model, "--kv-k", body.kv_k or body.kv,
           "--kv-v", body.kv_v or body.kv, "--ctx", str(body.context), "--seqs",
           str(body.sequences), "--steps", str(body.steps), "--db", db, "--json"]
    if body.layers:
        cmd += ["--layers", str(body.layers)]
    if body.device:
        cmd += ["--device", body.device]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return _err(504, f"the measurement ran past its {timeout_s} s limit and was stopped")
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["the measurement failed"])[-1]
        if "out of memory" in proc.stderr.lower():
            return _err(507, "the GPU ran out of memory for this plan; measure fewer layers "
                             "(layers) or a shorter context")
        return _err(422, err.removeprefix("kvplan: error: "))
    return json.loads(proc.stdout)
