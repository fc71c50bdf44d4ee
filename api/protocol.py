"""uvicorn's h11 protocol with a read timeout and problem+json answers to requests h11 itself refuses.

uvicorn times out only an idle keep-alive connection; a client that connects and sends nothing, or a
partial request line, headers or body, and then stalls, holds a connection and a file descriptor for
ever. `PlannerH11Protocol` gives every request a deadline from its first byte (or from the connection,
for the first request) until it has been read in full: past it the connection gets 408 as problem+json
and is closed. The clock stops while the application computes the answer. h11's own refusals (a malformed
request line, headers over the size limit, a bad Content-Length) are answered as problem+json too, with
h11's status hint (400 or 431) instead of uvicorn's plain-text 400.

`planner serve` selects the class (`uvicorn.run(http=...)`) and passes the timeout in the environment
(READ_TIMEOUT_ENV), which spawned workers inherit.
"""

from __future__ import annotations

import asyncio
import json
import os
from http import HTTPStatus
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

__all__ = ["DEFAULT_READ_TIMEOUT_S", "PROTOCOL", "READ_TIMEOUT_ENV", "PlannerH11Protocol", "problem_bytes"]

READ_TIMEOUT_ENV = "PLANNER_READ_TIMEOUT_S"
DEFAULT_READ_TIMEOUT_S = 20.0
"""Seconds a client has to send a whole request (line, headers and body), from its first byte."""
DEFAULT_MAX_HEAD_BYTES = 16 * 1024
"""Largest request line plus headers (h11's default and uvicorn's --h11-max-incomplete-event-size default)."""
PROTOCOL = "api.protocol:PlannerH11Protocol"
"""The import string `uvicorn.run(http=...)` takes."""
_TITLES = {400: "Bad request", 408: "Request timeout", 431: "Request header fields too large"}


def problem_bytes(status: int, detail: str) -> bytes:
    """An RFC 9457 body for an answer written below the application (no request path is known there)."""
    body = {"type": "about:blank", "title": _TITLES.get(status, "Error"), "status": status, "detail": detail}
    return json.dumps({**body, "instance": None}).encode()


class _Connection(h11.Connection):
    """h11's server connection, bounding a request head however it arrives and remembering the last
    protocol error, so that the answer can use its status hint."""

    def __init__(self, max_head_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes
        self.last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
            if isinstance(event, h11.Request):
                _check_header_size(event, self.max_head_bytes)
            return event
        except h11.RemoteProtocolError as exc:
            self.last_error = exc
            raise


def _check_header_size(event: h11.Request, limit: int) -> None:
    """h11 bounds a request head only while it is incomplete; one that arrives whole is bounded here too."""
    size = len(event.target) + sum(len(name) + len(value) + 4 for name, value in event.headers)
    if size > limit:
        raise h11.RemoteProtocolError(f"request head of {size} bytes exceeds {limit}", error_status_hint=431)


class PlannerH11Protocol(H11Protocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limit = config.h11_max_incomplete_event_size
        self.conn = _Connection(limit if limit is not None else DEFAULT_MAX_HEAD_BYTES)
        self.read_timeout_s = float(os.environ.get(READ_TIMEOUT_ENV, DEFAULT_READ_TIMEOUT_S))
        self.read_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.read_deadline is None:
            self._arm()
        super().data_received(data)
        if not self._reading():
            self._disarm()

    def _reading(self) -> bool:
        """True while part of a request has arrived and the rest has not."""
        if self.transport.is_closing():
            return False
        if self.conn.their_state is h11.SEND_BODY:
            return True
        return self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])

    def _arm(self) -> None:
        self.read_deadline = self.loop.call_later(self.read_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None

    def _timed_out(self) -> None:
        self.read_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_started and self.conn.their_state is h11.SEND_BODY:
            self.cycle.disconnected = True  # the application sees http.disconnect and its answer is dropped
            self.cycle.message_event.set()
        detail = f"the request was not received in full within {self.read_timeout_s:g} s"
        self._send_problem(408, detail)

    def send_400_response(self, msg: str) -> None:
        error = self.conn.last_error if isinstance(self.conn, _Connection) else None
        status = error.error_status_hint if error is not None else 400
        reason = str(error)[:200] if error is not None and str(error) else msg
        self._send_problem(status, f"invalid HTTP request: {reason}")

    def _send_problem(self, status: int, detail: str) -> None:
        """Answer `status` with a problem+json body and close, or just close if a response has begun."""
        payload = problem_bytes(status, detail)
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(payload)).encode()),
            (b"connection", b"close"),
        ]
        try:
            response = h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase)
            self.transport.write(self.conn.send(response) or b"")
            self.transport.write(self.conn.send(h11.Data(data=payload)) or b"")
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            pass
        self.transport.close()
