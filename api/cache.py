"""A bounded in-process cache of responses keyed by the canonical request."""

from __future__ import annotations

import threading
from collections import OrderedDict

from pydantic import BaseModel

__all__ = ["ResponseCache"]


class ResponseCache:
    """LRU of serialised responses. Keys are the validated request dumped as canonical JSON, plus a fingerprint
    of the named profile's content: a new stored version of a site profile never gets an older answer."""

    def __init__(self, max_entries: int = 256) -> None:
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()

    @staticmethod
    def key(route: str, request: BaseModel, profile_fingerprint: str = "") -> str:
        return f"{route}:{profile_fingerprint}:" + request.model_dump_json(exclude_none=False, round_trip=True)

    def get(self, key: str) -> bytes | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
