"""Dependencies injected into routes: the profile registry, the store, the cache, the metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.cache import ResponseCache
from api.metrics import Metrics
from planner.store import LiveProfiles, ProfileRegistry, Store

__all__ = ["CacheDep", "MetricsDep", "ProfilesDep", "StoreDep"]


def get_profiles(request: Request) -> ProfileRegistry:
    """Built-in profiles plus the newest stored version of each site profile, current at this request."""
    live: LiveProfiles = request.app.state.live_profiles
    return live.current()


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_cache(request: Request) -> ResponseCache:
    cache: ResponseCache = request.app.state.cache
    return cache


def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


ProfilesDep = Annotated[ProfileRegistry, Depends(get_profiles)]
StoreDep = Annotated[Store, Depends(get_store)]
CacheDep = Annotated[ResponseCache, Depends(get_cache)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
