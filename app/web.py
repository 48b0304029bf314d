"""The web app: REST API under /api/v1 and the HTML form, built by ``create_app()``."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

import kvcore
from kvcore import (
    CacheOptions,
    KvplanError,
    load_model,
)
from kvcore.engines import EngineSettings
from kvcore.query import Query as PlanQuery
from kvcore.query import answer, find_format, find_gpu_for
from kvcore.units import format_bytes, format_gib

from .common import make_query
from .schemas import PlanIn

ROOT = Path(__file__).resolve().parent.parent


@cache
def templates() -> Jinja2Templates:
    t = Jinja2Templates(directory=str(ROOT / "templates"))
    t.env.filters["bytes"] = lambda n: format_bytes(int(n), 2)
    t.env.filters["gib"] = lambda n: format_gib(int(n))
    return t


def error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message, "status": status, "field": field},
                        status_code=status)


def to_query(body: PlanIn) -> PlanQuery:
    """The kvcore Query of an API body. Never reads a local path."""
    if body.config is not None:
        spec = load_model(body.config)
    elif body.model:
        spec = load_model(body.model, allow_local=False)
    else:
        raise kvcore.InputError("give a model (catalog or Hub repo id) or a config object",
                                field="model")
    settings = EngineSettings(
        gpu_memory_utilization=body.gpu_memory_utilization,
        max_num_batched_tokens=body.max_num_batched_tokens, block_size=body.block_size,
        mem_fraction_static=body.mem_fraction_static,
        free_gpu_memory_fraction=body.free_gpu_memory_fraction)
    return make_query(
        spec, context=body.context, sequences=body.sequences, kv=body.kv, kv_k=body.kv_k,
        kv_v=body.kv_v, weights=body.weights, gpu=body.gpu, gpus=body.gpus, tp=body.tp,
        pp=body.pp, dp=body.dp, engine=body.engine, hot=body.hot, keep=body.keep,
        images=body.images, mtp=body.mtp, kv_budget=body.kv_budget, settings=settings)


def run_plan(body: PlanIn) -> dict[str, Any]:
    """Same request, same JSON as ``kvplan --json``."""
    return answer(to_query(body))


def api_router() -> APIRouter:
    api = APIRouter(prefix="/api/v1")

    @api.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"ok": True, "version": kvcore.__version__}

    @api.post("/plan")
    def post_plan(body: PlanIn) -> dict[str, Any]:
        return run_plan(body)

    @api.get("/plan")
    def get_plan(q: Annotated[PlanIn, Query()]) -> dict[str, Any]:
        return run_plan(q)

    @api.post("/find-gpu")
    def post_find_gpu(body: PlanIn) -> list[dict[str, Any]]:
        return find_gpu_for(to_query(body))

    @api.post("/find-format")
    def post_find_format(body: PlanIn) -> list[dict[str, Any]]:
        return find_format(to_query(body))

    @api.get("/models")
    def models() -> list[dict[str, Any]]:
        return [{"id": e.id, "repo": e.repo, "family": e.family, "source": e.source}
                for e in kvcore.model_catalog()]

    @api.get("/models/{model_id:path}")
    def model(model_id: str) -> dict[str, Any]:
        spec = load_model(model_id, allow_local=False, allow_hub=False)
        summary = kvcore.model_summary(spec)
        summary["bytes_per_token"] = {f.name: kvcore.bytes_per_token(spec, CacheOptions(
            kv_k=f, kv_v=f)) for f in kvcore.FORMATS}
        return summary

    @api.get("/gpus")
    def gpus() -> list[dict[str, Any]]:
        return [{"id": g.id, "name": g.name, "vendor": g.vendor, "memory_bytes": g.memory_bytes,
                 "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s, "source": g.source}
                for g in kvcore.gpu_catalog()]

    @api.get("/formats")
    def formats() -> list[dict[str, Any]]:
        return [{"name": f.name, "aliases": list(f.aliases), "block_values": f.block_values,
                 "block_bytes": f.block_bytes, "bits_per_value": f.bits_per_value,
                 "layout": f.layout, "quality": f.quality} for f in kvcore.FORMATS]

    return api


def create_app() -> FastAPI:
    app = FastAPI(title="kvplan", version=kvcore.__version__,
                  description="Byte-exact KV-cache capacity planning.")
    app.include_router(api_router())
    app.mount("/static", StaticFiles(directory=str(ROOT / "static")), name="static")

    @app.exception_handler(KvplanError)
    async def kvplan_error(request: Request, exc: KvplanError) -> JSONResponse:
        return error(422 if exc.field != "model" or "not a known" not in str(exc) else 404,
                     str(exc), exc.field)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query")]
        field = ".".join(loc) or None
        return error(422, f"{field or 'request'}: {first.get('msg', 'invalid')}", field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request, model: str = "qwen3.5-27b", gpu: str = "4090",
              context: str = "128k", sequences: str = "1", kv: str = "q8_0",
              weights: str = "q4_k_m") -> HTMLResponse:
        form = {"model": model, "gpu": gpu, "context": context, "sequences": sequences,
                "kv": kv, "weights": weights}
        result, message = None, None
        try:
            result = run_plan(PlanIn(model=model, gpu=gpu or None, context=context,
                                     sequences=sequences, kv=kv, weights=weights or None))
        except KvplanError as exc:
            message = str(exc)
        return templates().TemplateResponse(request, "index.html", {
            "form": form, "result": result, "error": message,
            "models": [e.id for e in kvcore.model_catalog()],
            "gpus": [g.id for g in kvcore.gpu_catalog()],
            "formats": kvcore.format_names(),
            "json": json.dumps(result, indent=2) if result else "",
        })

    return app
