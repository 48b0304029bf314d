"""The web app: REST API under /api/v1 and the HTML form, built by ``create_app()``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

import kvcore
from kvcore import KvplanError
from kvcore.catalog import MAX_CONFIG_BYTES
from kvcore.errors import cut, nearest

from . import schemas
from .api import api_router
from .apidoc import describe_from_cli
from .common import engine_field
from .pages import pages_router, templates

ROOT = Path(__file__).resolve().parent.parent


def error(status: int, message: str, field: str | None = None,
          headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message, "status": status, "field": field},
                        status_code=status, headers=headers)


#: how a union field's members (``context: int | str``) are named in an error
_UNION_MEMBERS = {"int": "a whole number", "str": "a string", "float": "a number",
                  "bool": "true or false"}


def _json_shown(value: Any) -> str:
    """A value a request sent, as JSON, cut as kvcore's errors cut what they quote."""
    return cut(json.dumps(value))


def _loc(error: Any) -> list[str]:
    """Where in the request a pydantic error points, without the body/query prefix."""
    loc = [str(p) for p in error.get("loc", ())]
    # only the first part says where: a field may be named body or query
    return loc[1:] if loc and loc[0] in ("body", "query") else loc


def validation_message(errors: Sequence[Any], takes: Sequence[str] = ()
                       ) -> tuple[int, str, str | None]:
    """(status, sentence, field) for pydantic's errors about a request: a body that is not
    JSON is a 400; a union field is named alone, with what it takes and what came; an unknown
    field with the nearest of ``takes`` (the route's own fields, where it has few), else of
    every request's."""
    first = errors[0]
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "JSON decode error")
        return 400, f"the request body is not valid JSON: {detail}", None
    loc = _loc(first)
    if not loc:
        got = first.get("input")
        what = ("nothing" if got is None else "a body that is not JSON"
                if isinstance(got, bytes) else "an array" if isinstance(got, list)
                else _json_shown(got))
        return 422, f"the request body must be a JSON object of the fields, got {what}", None
    if first.get("type") == "extra_forbidden" and len(loc) == 1:
        return 422, _unknown_field(loc[0], takes), loc[0]
    if len(loc) > 1 and loc[-1] in _UNION_MEMBERS:
        members = [str(e["loc"][-1]) for e in errors
                   if _loc(e)[:-1] == loc[:-1] and str(e["loc"][-1]) in _UNION_MEMBERS]
        field = ".".join(loc[:-1])
        expected = " or ".join(_UNION_MEMBERS[m] for m in dict.fromkeys(members))
        return 422, f"{field}: expected {expected}, got {_json_shown(first.get('input'))}", field
    field = ".".join(loc)
    return 422, f"{field}: {first.get('msg', 'invalid')}", field


#: the requests whose own fields are no plan's, by route
_FIELD_ROUTES = (("POST /api/v1/find-gpu", schemas.FindGpuIn),
                 ("POST /api/v1/command", schemas.CommandIn),
                 ("GET /api/v1/gpus", schemas.GpuListIn),
                 ("GET /api/v1/models", schemas.ModelListIn),
                 ("POST /api/v1/measure", schemas.MeasureIn))


def _request_fields() -> set[str]:
    """Every field a request of the API takes: a plan's and those of the other requests."""
    return {name for model in (schemas.PlanQueryIn, *(m for _, m in _FIELD_ROUTES))
            for name in model.model_fields}


def _unknown_field(name: str, takes: Sequence[str] = ()) -> str:
    """A field no request takes: the API's field where it is an engine's option
    (max_model_len), else the nearest field's name; where the route takes a few fields
    (``takes``), the nearest of them or the list."""
    engine = engine_field(name)
    if engine is not None:
        return f"{name}: no such field: {engine}"
    elsewhere = [route for route, model in _FIELD_ROUTES if name in model.model_fields]
    if elsewhere and name not in schemas.PlanQueryIn.model_fields:
        # a field of another request (vendor, segment: POST /find-gpu's and GET /gpus's)
        take = "take" if len(elsewhere) > 1 else "takes"
        return f"{name}: no such field here; {' and '.join(elsewhere)} {take} it"
    if takes:
        close = nearest(name, takes, cutoff=0.5)
        hint = f"did you mean {close}?" if close else f"it takes {', '.join(takes)}"
        return f"{name}: no such field ({hint})"
    close = nearest(name, sorted(_request_fields()))
    hint = f" (did you mean {close}?)" if close else ""
    return f"{name}: no such field{hint}; /openapi.json lists each request's fields"


#: most fields a route's query model may have for an unknown one to list them
FEW_FIELDS = 6


def _query_fields(request: Request) -> tuple[str, ...]:
    """The fields of the one query model a route reads (GET /models's q, GET /gpus's filters),
    where it has few; none for a route of a body or many fields."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or request.method != "GET":
        return ()
    for param in route.dependant.query_params:
        kind = param.field_info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            fields = tuple(kind.model_fields)
            return fields if len(fields) <= FEW_FIELDS else ()
    return ()


#: largest request body accepted (bytes): the largest config.json kvcore reads, with a MiB of
#: room for the rest of the form
MAX_BODY_BYTES = MAX_CONFIG_BYTES + (1 << 20)


def create_app() -> FastAPI:
    app = FastAPI(title="kvplan", version=kvcore.__version__,
                  description="Byte-exact KV-cache capacity planning.")
    openapi = app.openapi

    def described() -> dict[str, Any]:
        """FastAPI's document (built once), each field without a description given its CLI
        flag's help."""
        fresh = app.openapi_schema is None
        spec = openapi()
        if fresh:
            describe_from_cli(spec)
        return spec

    app.openapi = described  # type: ignore[method-assign]

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Any) -> Any:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return error(413, f"request body larger than {MAX_BODY_BYTES:,} bytes")
        if length is None and request.method in ("POST", "PUT", "PATCH"):
            body = await request.body()
            if len(body) > MAX_BODY_BYTES:
                return error(413, f"request body larger than {MAX_BODY_BYTES:,} bytes")
        return await call_next(request)
    app.include_router(api_router())
    app.include_router(pages_router())
    app.mount("/static", StaticFiles(directory=str(ROOT / "static")), name="static")

    @app.exception_handler(KvplanError)
    async def kvplan_error(request: Request, exc: KvplanError) -> JSONResponse:
        return error(422 if exc.field != "model" or "not a known" not in str(exc) else 404,
                     str(exc), exc.field)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, message, field = validation_message(exc.errors(), _query_fields(request))
        return error(status, message, field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if (exc.status_code == 404 and not request.url.path.startswith("/api/")
                and "text/html" in request.headers.get("accept", "")):
            # a browser that follows a wrong link gets a page that says where the pages are
            return templates().TemplateResponse(request, "error.html", {
                "error": f"No page at {cut(request.url.path)}: the pages are the plan (/), "
                         "/models, /gpus and /measurements; the REST API is under /api/v1, "
                         "its reference at /api."}, status_code=404)
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            # Allow lists every documented method of the path (GET and POST share /plan)
            documented = request.app.openapi().get("paths", {}).get(request.url.path, {})
            methods = sorted(m.upper() for m in documented)
            if methods:
                headers["Allow"] = ", ".join(methods)
        return error(exc.status_code, str(exc.detail), headers=headers or None)

    return app
