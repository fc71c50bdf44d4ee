"""ASGI middleware: request ids, metrics, and a hard limit on body size."""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.metrics import Metrics

__all__ = ["MAX_BODY_BYTES", "ServiceMiddleware"]

access = logging.getLogger("planner.access")

MAX_BODY_BYTES = 1_000_000
"""Largest request body accepted (bytes); a larger one gets 413 before it is parsed."""


class _TooLarge(HTTPException):
    """Raised from `receive` once a body without a (truthful) content-length passes the limit.

    An HTTPException, because FastAPI turns any other error raised while it reads the body into a 400;
    this one it re-raises, and the app's handler answers 413 as problem+json.
    """

    def __init__(self) -> None:
        super().__init__(413, f"request body exceeds the limit of {MAX_BODY_BYTES} bytes")


class ServiceMiddleware:
    """Tags every response with X-Request-ID, counts it, and refuses bodies over MAX_BODY_BYTES."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request_id = headers.get("x-request-id", "")[:64] or uuid.uuid4().hex
        started = time.perf_counter()
        status = {"code": 500}
        if int(headers.get("content-length", "0") or 0) > MAX_BODY_BYTES:
            await self._too_large(scope, send, request_id)
            self._observe(scope, 413, started, request_id)
            return
        received = {"bytes": 0}

        async def limited_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                received["bytes"] += len(message.get("body", b""))
                if received["bytes"] > MAX_BODY_BYTES:
                    raise _TooLarge
            return message

        async def tagged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode("latin-1"))]
            await send(message)

        try:
            await self.app(scope, limited_receive, tagged_send)
        except _TooLarge:
            await self._too_large(scope, send, request_id)
            status["code"] = 413
        self._observe(scope, status["code"], started, request_id)

    def _observe(self, scope: Scope, status: int, started: float, request_id: str = "") -> None:
        route = _route_label(scope)
        elapsed = time.perf_counter() - started
        self.metrics.requests.labels(route, scope.get("method", ""), str(status)).inc()
        self.metrics.latency.labels(route).observe(elapsed)
        access.info(
            "request",
            extra={
                "request_id": request_id,
                "method": scope.get("method"),
                "route": route,
                "status": status,
                "duration_ms": round(elapsed * 1e3, 2),
            },
        )

    @staticmethod
    async def _too_large(scope: Scope, send: Send, request_id: str) -> None:
        body: dict[str, Any] = {
            "type": "about:blank",
            "title": "Request body too large",
            "status": 413,
            "detail": f"request body exceeds the limit of {MAX_BODY_BYTES} bytes",
            "instance": scope.get("path"),
        }
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"x-request-id", request_id.encode("latin-1")),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


_KNOWN = ("/v1/plan", "/v1/estimate", "/v1/hardware-profiles", "/v1/models", "/livez", "/readyz", "/metrics", "/docs")


def _route_label(scope: Scope) -> str:
    """A bounded label: known route prefixes, else 'other' (ids in paths never become labels)."""
    path = str(scope.get("path", ""))
    for prefix in _KNOWN:
        if path == prefix or path.startswith(prefix + "/"):
            return prefix
    return "/" if path == "/" else "other"
