"""The web app: REST API under /api/v1 and the HTML form, built by ``create_app()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

import kvcore
from kvcore import KvplanError

from .api import api_router
from .pages import pages_router

ROOT = Path(__file__).resolve().parent.parent


def error(status: int, message: str, field: str | None = None,
          headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message, "status": status, "field": field},
                        status_code=status, headers=headers)


#: largest request body accepted (bytes): a config.json is capped at 1 MiB, with room for the
#: rest of the form
MAX_BODY_BYTES = 2 << 20


def create_app() -> FastAPI:
    app = FastAPI(title="kvplan", version=kvcore.__version__,
                  description="Byte-exact KV-cache capacity planning.")

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
        first = exc.errors()[0]
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query")]
        field = ".".join(loc) or None
        return error(422, f"{field or 'request'}: {first.get('msg', 'invalid')}", field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            # Allow lists every documented method of the path (GET and POST share /plan)
            documented = request.app.openapi().get("paths", {}).get(request.url.path, {})
            methods = sorted(m.upper() for m in documented)
            if methods:
                headers["Allow"] = ", ".join(methods)
        return error(exc.status_code, str(exc.detail), headers=headers or None)

    return app
