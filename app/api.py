"""The REST API under /api/v1: same answers as ``kvplan --json``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

import kvcore
from kvcore import CacheOptions, load_model
from kvcore.engines import EngineSettings
from kvcore.query import Query as PlanQuery
from kvcore.query import answer, find_format, find_gpu_for

from .common import make_query
from .schemas import PlanIn

__all__ = ["api_router", "run_plan", "to_query"]


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


