"""Run the service on loopback in a child process, for tests and benchmarks (never a public address)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO

import httpx

from api.protocol import PROTOCOL

__all__ = ["ServiceNotReady", "local_service"]


class ServiceNotReady(RuntimeError):
    """The child did not answer /readyz in time."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _uvicorn(port: int, workers: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "api.main:create_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        "--http",
        PROTOCOL,
    ]


def _planner_serve(port: int, workers: int, read_timeout_s: float | None) -> list[str]:
    return (
        [sys.executable, "-m", "planner.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
        + (["--workers", str(workers)] if workers > 1 else [])
        + (["--read-timeout", repr(read_timeout_s)] if read_timeout_s is not None else [])
    )


@contextmanager
def local_service(
    workers: int = 1,
    ready_timeout_s: float = 60.0,
    *,
    planner_serve: bool = False,
    stderr: IO[str] | None = None,
    read_timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Start the service on 127.0.0.1 on a free port; yield its URL once ready; stop it on exit.

    By default uvicorn is run directly (quiet, with the service's protocol class and its default read timeout,
    one process's metrics); `planner_serve` runs the `planner serve` command instead,
    with its own logging, metrics summed across workers, the read timeout (`read_timeout_s`, else the
    command's default) and problem+json answers from the protocol layer; `stderr` receives the child's log output.
    `env`: variables set for the child on top of this process's environment (PLANNER_WRITE_TOKENS, DATABASE_URL).
    """
    if read_timeout_s is not None and not planner_serve:
        raise ValueError("read_timeout_s is an option of planner serve; give planner_serve=True")
    port = _free_port()
    command = _planner_serve(port, workers, read_timeout_s) if planner_serve else _uvicorn(port, workers)
    process = subprocess.Popen(command, stderr=stderr, env={**os.environ, **env} if env is not None else None)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise ServiceNotReady(f"the service on {url} was not ready within {ready_timeout_s:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
