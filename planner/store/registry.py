"""The profiles a request may name: the built-ins plus the newest stored version of each `base@site`.

`LiveProfiles.current()` asks the database on every call whether any version was saved since it last
looked (`profile_versions_state`: one count/max query) and reloads only then, so every worker process
and every replica serves a new calibration from its next request on.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator, Mapping
from datetime import datetime

from pydantic import ValidationError

from planner.profiles import HardwareProfile
from planner.store.engine import Store
from planner.store.profile_versions import newest_profile_versions, profile_versions_state

__all__ = ["LiveProfiles", "ProfileRegistry"]

log = logging.getLogger("planner.store")


def _fingerprint(profile: HardwareProfile) -> str:
    return hashlib.sha256(profile.model_dump_json().encode()).hexdigest()[:16]


class ProfileRegistry(Mapping[str, HardwareProfile]):
    """Profiles by id, each with a fingerprint of its content (what a cached answer was computed with)."""

    def __init__(self, profiles: Mapping[str, HardwareProfile], versions: Mapping[str, int] | None = None) -> None:
        self._profiles = dict(profiles)
        self._fingerprints = {pid: _fingerprint(p) for pid, p in self._profiles.items()}
        self.versions: Mapping[str, int] = dict(versions or {})
        """The stored version behind each `base@site` id (built-ins are absent)."""

    def __getitem__(self, profile_id: str) -> HardwareProfile:
        return self._profiles[profile_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._profiles)

    def __len__(self) -> int:
        return len(self._profiles)

    def fingerprint(self, profile_id: str | None) -> str:
        """A short hash of the named profile's content; empty for an id it does not hold (or none)."""
        return self._fingerprints.get(profile_id or "", "")


class LiveProfiles:
    """Built-in profiles plus the newest stored versions, re-read when the stored versions change."""

    def __init__(self, builtins: Mapping[str, HardwareProfile], store: Store) -> None:
        self._builtins = dict(builtins)
        self._store = store
        self._lock = threading.Lock()
        self._state: tuple[int, datetime | None] | None = None
        self._registry = ProfileRegistry(self._builtins)

    def current(self) -> ProfileRegistry:
        state = profile_versions_state(self._store)
        if state == self._state:
            return self._registry
        with self._lock:
            if state != self._state:
                self._registry = self._load()
                self._state = state
            return self._registry

    def _load(self) -> ProfileRegistry:
        profiles, versions = dict(self._builtins), {}
        for stored in newest_profile_versions(self._store):
            if stored.id in self._builtins:
                continue  # a built-in id is never shadowed
            try:
                profiles[stored.id] = HardwareProfile.model_validate(stored.profile)
            except ValidationError as exc:
                log.warning("stored profile %s v%d is invalid here, skipped: %s", stored.id, stored.version, exc)
                continue
            versions[stored.id] = stored.version
        return ProfileRegistry(profiles, versions)
