"""The worst legal plan requests found: wall time of each through the real API, and whether its search completed.

Run: python bench/bench_worst.py [--repeats N]

Each case is posted to /v1/plan (FastAPI TestClient, no network) to an app
whose response cache holds nothing (`cache_entries=0`), so every repeat
searches. Prints the median and the worst wall time per case, the candidates
counted and evaluated, and `search.complete` / `search.truncated_by`. The
search is bounded by work, not by the clock (planner/search/plan.py), so the
answers are the same on any machine; only the times here depend on it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from fastapi.testclient import TestClient

from api.main import create_app

_HUGE_SHAPE = {
    "num_layers": 1024,
    "hidden_size": 131_072,
    "num_attention_heads": 1024,
    "vocab_size": 128_000,
    "seq_length": 4096,
}
_MANY = 1_048_576

CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "huge explicit shape, 1,048,576 x H100, gpu_efficiency, top_k 100",
        {
            "model": dict(_HUGE_SHAPE),
            "cluster": {"profile": "dgx-h100", "num_gpus": _MANY},
            "training": {"global_batch_size": _MANY},
            "objective": "gpu_efficiency",
            "top_k": 100,
        },
    ),
    (
        "huge explicit shape, 1,048,576 x H100, step_time, top_k 100",
        {
            "model": dict(_HUGE_SHAPE),
            "cluster": {"profile": "dgx-h100", "num_gpus": _MANY},
            "training": {"global_batch_size": _MANY},
            "top_k": 100,
        },
    ),
    (
        "DeepSeek-V3, 1,048,576 x GB200 NVL72, top_k 100",
        {
            "model": {"preset": "deepseek-v3"},
            "cluster": {"profile": "gb200-nvl72", "num_gpus": _MANY},
            "training": {"global_batch_size": _MANY},
            "top_k": 100,
        },
    ),
    (
        "DeepSeek-V3, 1,048,576 x GB200 NVL72, gpu_efficiency, top_k 100",
        {
            "model": {"preset": "deepseek-v3"},
            "cluster": {"profile": "gb200-nvl72", "num_gpus": _MANY},
            "training": {"global_batch_size": _MANY},
            "objective": "gpu_efficiency",
            "top_k": 100,
        },
    ),
    (
        "DeepSeek-V3, 786,432 x H100, gpu_efficiency, top_k 100",
        {
            "model": {"preset": "deepseek-v3"},
            "cluster": {"profile": "dgx-h100", "num_gpus": 786_432},
            "training": {"global_batch_size": 786_432},
            "objective": "gpu_efficiency",
            "top_k": 100,
        },
    ),
    (
        "Megatron 529.6B, 1,048,576 x H100, gpu_efficiency, top_k 100",
        {
            "model": {"preset": "megatron-529.6b"},
            "cluster": {"profile": "dgx-h100", "num_gpus": _MANY},
            "training": {"global_batch_size": 4096},
            "objective": "gpu_efficiency",
            "top_k": 100,
        },
    ),
    (
        "nothing fits (huge shape, 8 x A100-40GB), 10 constraints to diagnose",
        {
            "model": dict(_HUGE_SHAPE),
            "cluster": {"profile": "dgx-a100-40gb", "num_gpus": 8},
            "training": {"global_batch_size": 8},
            "constraints": {
                "tp": [1, 2],
                "pp": [1, 2],
                "dp": [1, 2, 4],
                "cp": [1, 2],
                "ep": 1,
                "vp": 1,
                "micro_batch_size": 1,
                "recompute": "none",
                "sequence_parallel": False,
                "zero_stage": 0,
            },
            "top_k": 100,
        },
    ),
    (
        "nothing fits (DeepSeek-V3, 1,048,576 x H100), 6 constraints to diagnose",
        {
            "model": {"preset": "deepseek-v3"},
            "cluster": {"profile": "dgx-h100", "num_gpus": _MANY},
            "training": {"global_batch_size": _MANY},
            "constraints": {
                "tp": 1,
                "pp": 1,
                "ep": 1,
                "recompute": "none",
                "zero_stage": 0,
                "micro_batch_size": [8, 16],
            },
            "objective": "gpu_efficiency",
            "top_k": 100,
        },
    ),
    (
        "badly factoring count (huge shape, 1,048,568 x H100 = 131,071 nodes), step_time, top_k 100",
        {
            "model": dict(_HUGE_SHAPE),
            "cluster": {"profile": "dgx-h100", "num_gpus": _MANY - 8},
            "training": {"global_batch_size": _MANY},
            "top_k": 100,
        },
    ),
    (
        "badly factoring count, nothing fits (huge shape, 1,000 x A100-40GB), diagnosis tries more GPUs",
        {
            "model": dict(_HUGE_SHAPE),
            "cluster": {"profile": "dgx-a100-40gb", "num_gpus": 1000},
            "training": {"global_batch_size": 1000},
            "top_k": 100,
        },
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    header = f"{'case':72s} {'status':>6s} {'median s':>8s} {'max s':>6s} {'candidates':>10s} {'evaluated':>10s}"
    print(header + "  complete")
    with TestClient(create_app(cache_entries=0)) as client:
        for name, body in CASES:
            times: list[float] = []
            answer: dict[str, Any] = {}
            status = 0
            for r in range(args.repeats + 1):  # the first run warms imports and tables, and is not counted
                started = time.perf_counter()
                response = client.post("/v1/plan", json=body)
                if r:
                    times.append(time.perf_counter() - started)
                status, answer = response.status_code, response.json()
            search = answer.get("search", {}) if status == 200 else {}
            why = ",".join(search.get("truncated_by") or []) if search else answer.get("detail", "")[:60]
            print(
                f"{name:72s} {status:>6d} {statistics.median(times):>8.2f} {max(times):>6.2f}"
                f" {search.get('candidates', 0):>10,d} {search.get('evaluated', 0):>10,d}"
                f"  {search.get('complete')} {why}"
            )


if __name__ == "__main__":
    main()
