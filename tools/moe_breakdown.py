"""Print the MoE rows' error beside the settings that split it: CUDA graphs, dispatcher, all-to-all overlap.

Usage: `PYTHONPATH=$PWD python3 tools/moe_breakdown.py`. The same rows and errors as `planner validate`
(`planner.calibration.report.build_report`). For each row, the step time the model misses (published minus
predicted) per layer pass of one micro-batch (forward and backward, on one pipeline stage) and per token of that
pass: a gap fixed per pass points at the host (kernel launches, synchronisation), one fixed per token at the GPU
or the network. The README's MoE paragraph under "Where the model is weak" is this output.
"""

from __future__ import annotations

import numpy as np

from planner.calibration.published import PublishedRun, published_runs
from planner.calibration.report import RunRow, build_report
from planner.profiles import load_profiles


def _layer_passes(run: PublishedRun) -> float:
    """Layer passes (forward + backward of one layer for one micro-batch) one GPU runs per step."""
    lay = run.layout
    microbatches = run.training.global_batch_size / (lay.micro_batch_size * lay.dp)
    return run.model.num_layers / lay.pp * microbatches


def _line(run: PublishedRun, row: RunRow) -> str:
    rt, lay = run.training.runtime, run.layout
    assert run.model.moe is not None
    missing = row.published_step_s - row.predicted_step_s
    passes = _layer_passes(run)
    tokens = lay.micro_batch_size * run.model.seq_length / lay.cp
    return (
        f"| {run.id} | {row.error:+.1%} | {'yes' if rt.cuda_graphs else 'no'} | {rt.moe_dispatcher.value} |"
        f" {'yes' if rt.moe_a2a_overlap else 'no'} | {run.training.precision.value} |"
        f" {run.model.moe.num_experts // lay.ep} | {1e3 * missing / passes:.2f} |"
        f" {1e6 * missing / passes / tokens:.2f} |"
    )


def _summary(name: str, rows: list[RunRow]) -> str:
    errors = np.asarray([r.error for r in rows])
    return (
        f"{name}: {len(rows)} rows, mean {errors.mean():+.1%} (abs {np.abs(errors).mean():.1%}),"
        f" from {errors.min():+.1%} to {errors.max():+.1%}"
    )


def main() -> None:
    runs = {r.id: r for r in published_runs() if r.model.moe is not None}
    rows = [r for r in build_report(load_profiles(), with_figures=False).runs if r.id in runs]
    print(
        "| run | error | CUDA graphs | dispatcher | a2a overlap | precision | local experts |"
        " missing ms per layer pass | missing us per token and layer |\n|---|---|---|---|---|---|---|---|---|"
    )
    for row in rows:
        print(_line(runs[row.id], row))
    graphed = [r for r in rows if runs[r.id].training.runtime.cuda_graphs]
    eager = [r for r in rows if not runs[r.id].training.runtime.cuda_graphs]
    print()
    print(_summary("with CUDA graphs", graphed))
    print(_summary("without", eager))


if __name__ == "__main__":
    main()
