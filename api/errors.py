"""Every error as RFC 9457 problem+json, mapped in one place. Nothing leaks a traceback or a path."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.body import BodyFieldError
from api.schemas import MODEL_FORMS
from planner.errors import (
    InfeasibleError,
    InvalidSpecError,
    PlannerError,
    UnknownHardwareError,
    UnknownPresetError,
    validator_message,
)

__all__ = ["install_error_handlers", "problem"]

log = logging.getLogger("planner.api")
_METHODS = {"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}
PROBLEM = "application/problem+json"
_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "Invalid request",
    500: "Internal error",
}
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "type": "object",
    "required": ["type", "title", "status", "detail", "instance"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": ["string", "null"]},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["loc", "msg"],
                "properties": {
                    "loc": {"type": "array", "items": {"type": ["string", "integer"]}},
                    "msg": {"type": "string"},
                },
            },
        },
    },
}
"""RFC 9457 problem details, as every error response carries them (documented in the OpenAPI schema)."""
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {
        "description": "Client error (400, 401, 403, 404, 405, 413, 415, 422): problem+json naming the field where"
        " there is one",
        "content": {PROBLEM: {"schema": PROBLEM_SCHEMA}},
    },
}


def problem(
    status: int, detail: str, request: Request | None = None, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {
        "type": "about:blank",
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "instance": request.url.path if request is not None else None,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def _loc(loc: tuple[Any, ...]) -> list[str | int]:
    """The location as the client wrote it: the model form's tag (`schemas.MODEL_FORMS`) after `model` dropped."""
    return [p if isinstance(p, int) else str(p) for p in loc if p not in MODEL_FORMS]


async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [
        {"loc": _loc(e.get("loc", ())), "msg": validator_message(str(e.get("msg", "")))} for e in exc.errors()[:20]
    ]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    detail = f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return problem(422, detail, request, errors=errors)


async def _planner(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, InvalidSpecError):
        loc = exc.field.split(".")
        return problem(422, str(exc), request, errors=[{"loc": loc, "msg": exc.message}])
    if isinstance(exc, UnknownHardwareError | UnknownPresetError):
        return problem(404, str(exc), request)
    if isinstance(exc, InfeasibleError):
        return problem(422, str(exc), request, reasons=exc.reasons)
    return problem(422, str(exc), request)


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    # Keep the exception's headers: a 405 must say which methods are allowed (RFC 9110 `Allow`).
    if isinstance(exc, BodyFieldError):
        return problem(422, str(exc.detail), request, errors=[{"loc": exc.loc, "msg": exc.msg}])
    headers = exc.headers
    if exc.status_code == 405 and (allowed := _documented_methods(request)):
        headers = {**(headers or {}), "Allow": allowed}
    return problem(exc.status_code, str(exc.detail), request, headers=headers)


def _documented_methods(request: Request) -> str | None:
    """Every method the OpenAPI schema documents at this path (HEAD with GET), or None for an undocumented path.

    Starlette's 405 names only the methods of the first route matching the path: a path served by two routes
    (GET and POST /v1/observations) would answer `Allow: POST` to a DELETE. RFC 9110 section 15.5.6 wants all."""
    path = request.url.path
    for template, operations in request.app.openapi().get("paths", {}).items():
        if re.fullmatch(re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)), path):
            methods = {m.upper() for m in operations if m.upper() in _METHODS}
            return ", ".join(sorted(methods | ({"HEAD"} if "GET" in methods else set())))
    return None


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s", request.url.path)
    return problem(500, "the planner failed on this request; it has been logged", request)


def install_error_handlers(app: FastAPI) -> None:
    """Map every error to problem+json, and document that in the OpenAPI schema of routes included after this."""
    app.router.responses = {**ERROR_RESPONSES, **app.router.responses}
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(PlannerError, _planner)
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
