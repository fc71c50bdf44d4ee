"""What the database adds to each request: the stored-profile check, against the estimate it precedes.

Run: python bench/bench_store.py [--url DATABASE_URL] [--repeats N]

Every /v1/plan and /v1/estimate asks the database whether a site profile was saved since the worker last
looked (`LiveProfiles.current()`: one count/max query, `planner.store.registry`). This prints its median
cost and the median of one in-process estimate of GPT-3 175B on 1024 A100s (`api.convert.answer_estimate`,
the work the check precedes), and their ratio, both measured in this run. SQLite in a temporary file
unless --url names another database (PostgreSQL: tools/pg_throwaway.sh starts one).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

from api.convert import answer_estimate
from api.schemas import EstimateRequest
from planner.profiles import load_profiles
from planner.store import LiveProfiles, open_store

REQUEST = {
    "model": {"preset": "gpt3-175b"},
    "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 1024},
    "training": {"global_batch_size": 1536},
    "layout": {"tp": 8, "pp": 16, "dp": 8, "recompute": "full"},
}


def _median_us(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="database URL (default: SQLite in a temporary file)")
    parser.add_argument("--repeats", type=int, default=500)
    args = parser.parse_args()
    url = args.url or f"sqlite:///{tempfile.mkdtemp(prefix='bench-store-')}/planner.db"
    store = open_store(url)
    profiles = load_profiles()
    live = LiveProfiles(profiles, store)
    request = EstimateRequest.model_validate(REQUEST)
    live.current()
    answer_estimate(request, profiles)
    check = _median_us(live.current, args.repeats)
    estimate = _median_us(lambda: answer_estimate(request, profiles), args.repeats)
    store.close()
    print(
        f"backend {store.backend}: profile check {check:.0f} us, estimate {estimate:.0f} us,"
        f" check / estimate = {check / estimate:.3f}"
    )


if __name__ == "__main__":
    main()
