"""JSON request bodies parsed so that an integer too long for Python still gets an answer naming its field.

Python refuses to convert a decimal string of more than `sys.get_int_max_str_digits()` digits (4300 by
default; CVE-2020-10735), and does so inside `json.loads`, before any field is known: FastAPI then answers
400 "There was an error parsing the body". `JsonBodyRoute` parses the body itself, keeps such a number as
a marker, and refuses the request with 422 naming the first field (its JSON path) that holds one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

__all__ = ["BodyFieldError", "JsonBodyRoute", "parse_json"]


class _LongInt:
    """An integer literal with more digits than Python converts."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


class BodyFieldError(HTTPException):
    """A body field refused before validation; answered 422 with `errors` naming it (`api.errors`).

    An HTTPException, because FastAPI re-raises that while reading a body (anything else becomes a 400).
    """

    def __init__(self, loc: list[str | int], msg: str) -> None:
        self.loc, self.msg = loc, msg
        super().__init__(422, f"{'.'.join(str(p) for p in loc)}: {msg}")


def _int(literal: str) -> int | _LongInt:
    try:
        return int(literal)
    except ValueError:
        return _LongInt(len(literal.lstrip("-")))


def _first_long_int(value: Any, path: list[str | int]) -> tuple[list[str | int], _LongInt] | None:
    if isinstance(value, _LongInt):
        return path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if (found := _first_long_int(item, [*path, key])) is not None:
            return found
    return None


def parse_json(raw: bytes) -> Any:
    """The body as JSON; raises BodyFieldError at the first integer too long to convert."""
    value = json.loads(raw, parse_int=_int)
    if (found := _first_long_int(value, ["body"])) is not None:
        path, number = found
        limit = sys.get_int_max_str_digits()
        raise BodyFieldError(path, f"an integer of {number.digits} digits; at most {limit} digits are read")
    return value


class _JsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body())
        return self._json


class JsonBodyRoute(APIRoute):
    """An APIRoute whose handler reads JSON bodies with `parse_json`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(_JsonRequest(request.scope, request.receive))

        return route_handler
