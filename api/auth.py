"""Who may write: bearer tokens configured at start-up in `PLANNER_WRITE_TOKENS`; reads stay open.

`PLANNER_WRITE_TOKENS` is a comma-separated list of `owner:token` pairs (a bare `token` belongs to the
owner "default"). A write route depends on `WriterDep`, which yields the owner of the presented token:
- no token configured: 403, writes are disabled (the body says how to enable them);
- no `Authorization: Bearer ...` header, or a token that matches none: 401 with `WWW-Authenticate: Bearer`.
The presented token is compared with every configured one by `hmac.compare_digest` (constant time per
comparison, and no early exit), so the answer's timing does not tell how much of a token was right.
"""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from planner.errors import InvalidSpecError

__all__ = ["OWNER_PATTERN", "WRITE_TOKENS_ENV", "WriteTokens", "WriterDep", "require_writer"]

WRITE_TOKENS_ENV = "PLANNER_WRITE_TOKENS"
OWNER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
"""An owner name: letters, digits, `.`, `_`, `-`; at most 64 characters."""
DEFAULT_OWNER = "default"
MIN_TOKEN_LENGTH = 16
"""Shortest token accepted: 16 random characters are beyond guessing over HTTP; shorter ones are refused."""
_TOKEN = re.compile(r"^[\x21-\x7e]+$")
"""Printable ASCII without spaces: what an HTTP header carries unchanged (RFC 6750 b64token is narrower)."""


@dataclass(frozen=True, slots=True)
class WriteTokens:
    """The configured (owner, token) pairs; empty means writes are disabled."""

    pairs: tuple[tuple[str, bytes], ...] = ()

    @classmethod
    def parse(cls, text: str) -> WriteTokens:
        """`owner:token,owner:token,token` -> pairs; raises InvalidSpecError naming the variable and the rule."""
        pairs: list[tuple[str, bytes]] = []
        for number, item in enumerate((part.strip() for part in text.split(",")), start=1):
            if not item:
                continue
            owner, colon, token = item.partition(":")
            owner, token = (owner, token) if colon else (DEFAULT_OWNER, owner)
            if not re.match(OWNER_PATTERN, owner):
                raise InvalidSpecError(WRITE_TOKENS_ENV, f"entry {number}: owner must match {OWNER_PATTERN}")
            if len(token) < MIN_TOKEN_LENGTH or not _TOKEN.match(token):
                raise InvalidSpecError(
                    WRITE_TOKENS_ENV,
                    f"entry {number}: a token is at least {MIN_TOKEN_LENGTH} printable ASCII characters, no spaces"
                    " or commas (e.g. `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`)",
                )
            if any(hmac.compare_digest(token.encode(), known) for _, known in pairs):
                raise InvalidSpecError(WRITE_TOKENS_ENV, f"entry {number}: the same token is given twice")
            pairs.append((owner, token.encode()))
        return cls(tuple(pairs))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WriteTokens:
        return cls.parse((os.environ if env is None else env).get(WRITE_TOKENS_ENV, ""))

    @property
    def enabled(self) -> bool:
        return bool(self.pairs)

    def owner_of(self, token: str) -> str | None:
        """The owner of `token`, or None; every configured token is compared, whatever matches first."""
        presented = token.encode("utf-8", "surrogateescape")
        owner = None
        for name, known in self.pairs:
            if hmac.compare_digest(presented, known):
                owner = name
        return owner


_bearer = HTTPBearer(auto_error=False, description=f"A write token configured in {WRITE_TOKENS_ENV}.")
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="planner"'}
_INVALID = {"WWW-Authenticate": 'Bearer realm="planner", error="invalid_token"'}
"""RFC 6750 section 3: the challenge, with `error="invalid_token"` when a token was presented but is not valid."""


def require_writer(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> str:
    """The owner of the request's bearer token; 403 when writes are disabled, 401 without a valid token."""
    tokens: WriteTokens = request.app.state.write_tokens
    if not tokens.enabled:
        raise HTTPException(
            403,
            f"writes are disabled on this service: no write token is configured. Set {WRITE_TOKENS_ENV}="
            "owner:token (comma-separated for several) in the service's environment and restart it",
        )
    if credentials is None:
        raise HTTPException(401, "this write needs an `Authorization: Bearer <token>` header", headers=_CHALLENGE)
    owner = tokens.owner_of(credentials.credentials)
    if owner is None:
        raise HTTPException(401, "the bearer token is not a configured write token", headers=_INVALID)
    return owner


WriterDep = Annotated[str, Depends(require_writer)]
"""The owner writing; a route that changes stored data depends on it."""
