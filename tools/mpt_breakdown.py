"""Print the MosaicML MPT rows' error by sequence length, node count, recompute, GPU and model size.

Usage: `PYTHONPATH=$PWD python3 tools/mpt_breakdown.py`. The same rows and errors as `planner validate`
(`planner.calibration.report.build_report`); the README's MPT table is this output.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from planner.calibration.published import PublishedRun, published_runs
from planner.calibration.report import RunRow, build_report
from planner.profiles import load_profiles
from planner.specs import Recompute

MOSAICML = "MosaicML_llmfoundry_MPT"


def _line(name: str, rows: list[RunRow]) -> str:
    errors = np.abs([r.error for r in rows])
    return (
        f"| {name} | {len(rows)} | {100 * errors.mean():.1f}% | {100 * np.percentile(errors, 90):.1f}% |"
        f" {100 * errors.max():.1f}% |"
    )


def main() -> None:
    runs = {r.id: r for r in published_runs() if r.group == MOSAICML}
    rows = [r for r in build_report(load_profiles()).runs if r.id in runs]
    groups: list[tuple[str, Callable[[PublishedRun], bool]]] = [
        ("all", lambda r: True),
        ("512-2048 tokens", lambda r: r.model.seq_length <= 2048),
        ("4096-8192 tokens", lambda r: 4096 <= r.model.seq_length <= 8192),
        ("16k-64k tokens", lambda r: r.model.seq_length >= 16384),
        ("one node (8 GPUs)", lambda r: r.num_gpus == 8),
        ("2-16 nodes (all at 2048 tokens)", lambda r: r.num_gpus > 8),
        ("full recompute", lambda r: r.layout.recompute is Recompute.FULL),
        ("no recompute", lambda r: r.layout.recompute is Recompute.NONE),
        ("H100", lambda r: r.gpu.startswith("H100")),
        ("A100 80GB", lambda r: r.gpu == "A100-SXM4-80GB"),
        ("A100 40GB", lambda r: r.gpu == "A100-SXM4-40GB"),
        ("125M-3B", lambda r: r.model.hidden_size <= 2560),
        ("7B-13B", lambda r: 4096 <= r.model.hidden_size <= 5120),
        ("30B-70B", lambda r: r.model.hidden_size >= 7168),
    ]
    print("| rows | n | mean abs error | 90th pct | max |\n|---|---|---|---|---|")
    for name, keep in groups:
        print(_line(name, [r for r in rows if keep(runs[r.id])]))
    slow = sum(r.error < 0 for r in rows)
    print(f"\npredicted too fast: {len(rows) - slow} of {len(rows)} rows; too slow: {slow}")


if __name__ == "__main__":
    main()
