"""Dependencies injected into routes: the profile registry, the cache, the metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from fastapi import Depends, Request

from api.cache import ResponseCache
from api.metrics import Metrics
from planner.profiles import HardwareProfile

__all__ = ["CacheDep", "MetricsDep", "ProfilesDep"]


def get_profiles(request: Request) -> Mapping[str, HardwareProfile]:
    profiles: Mapping[str, HardwareProfile] = request.app.state.profiles
    return profiles


def get_cache(request: Request) -> ResponseCache:
    cache: ResponseCache = request.app.state.cache
    return cache


def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


ProfilesDep = Annotated[Mapping[str, HardwareProfile], Depends(get_profiles)]
CacheDep = Annotated[ResponseCache, Depends(get_cache)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
