"""The FastAPI application: `create_app()`; profiles load in the lifespan, not at import."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from api.auth import WriteTokens
from api.cache import ResponseCache
from api.errors import install_error_handlers
from api.metrics import Metrics
from api.middleware import ServiceMiddleware
from api.routes import calibrations, catalog, health, observations, plan, timeline
from planner.presets import load_presets
from planner.profiles import DEFAULT_PROFILES_DIR, load_profiles
from planner.store import LiveProfiles, open_store

__all__ = ["create_app"]

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""The web page: plain HTML, CSS and JavaScript served as they are (no build step, no CDN)."""

DESCRIPTION = """Searches tensor, pipeline, data, context and expert parallel layouts for transformer training
under the GPUs' memory limit, with the analytical cost model of Narayanan et al. 2021 generalised to today's
models, and returns ranked layouts with predicted step time, MFU, memory per GPU and launch arguments."""


def create_app(
    profiles_dir: Path = DEFAULT_PROFILES_DIR,
    cache_entries: int = 256,
    database_url: str | None = None,
    write_tokens: str | None = None,
) -> FastAPI:
    """The service. `database_url` (default: DATABASE_URL, else the SQLite file PLANNER_DB_PATH) is opened and
    migrated in the lifespan; `write_tokens` (default: PLANNER_WRITE_TOKENS) are read here, at start-up."""
    metrics = Metrics()
    tokens = WriteTokens.from_env() if write_tokens is None else WriteTokens.parse(write_tokens)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.profiles = load_profiles(profiles_dir)
        app.state.store = open_store(database_url)
        app.state.live_profiles = LiveProfiles(app.state.profiles, app.state.store)
        load_presets()
        metrics.started()
        yield
        metrics.stopped()
        app.state.store.close()

    app = FastAPI(title="Parallel-layout planner", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.cache = ResponseCache(cache_entries)
    app.state.metrics = metrics
    app.state.write_tokens = tokens
    install_error_handlers(app)
    app.include_router(plan.router)
    app.include_router(catalog.router)
    app.include_router(health.router)
    app.include_router(timeline.router)
    app.include_router(observations.router)
    app.include_router(calibrations.router)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(STATIC_DIR / "favicon.ico", media_type="image/x-icon")

    app.add_middleware(ServiceMiddleware, metrics=metrics)
    return app
