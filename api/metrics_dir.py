"""The directory of the workers' metric files (prometheus-client multiprocess mode), made per start.

Apart from `api.metrics` because prometheus-client reads PROMETHEUS_MULTIPROC_DIR once, when it is
imported: `planner serve` must set it before anything imports prometheus_client in its own process
(which serves when there is one worker), so this module imports nothing of it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MULTIPROC_ENV", "multiprocess_dir"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""The variable prometheus-client reads at import to switch to its multiprocess mode."""


@contextmanager
def multiprocess_dir() -> Iterator[str]:
    """A fresh directory for the workers' metric files, exported as PROMETHEUS_MULTIPROC_DIR; removed on exit."""
    path = tempfile.mkdtemp(prefix="planner-metrics-")
    previous = os.environ.get(MULTIPROC_ENV)
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous
        shutil.rmtree(path, ignore_errors=True)
