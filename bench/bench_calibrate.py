"""How a site calibration's time grows with the number of observations (`api.calibrate.MAX_CALIBRATION_RUNS`).

Run: python bench/bench_calibrate.py [--runs 8,16,32] [--repeats N]

The fit (`planner.calibration.site.calibrate_site`) runs one grid search on all runs and one per run left
out, each over every run: its time grows with about the square of the runs. This builds synthetic
observations on dgx-h100 whose measured step times come from known constants (eta 0.6, t0 8 us, network
0.45: every constant identified, the three-constant grid), over layouts that cross the network, and prints
the median time of one calibration per run count and its ratio to the smallest count, measured in this run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from planner.calibration.fit import GEMM_OVERHEAD_US, GEMM_PEAK_EFFICIENCY, NETWORK_EFFICIENCY, predict, with_constants
from planner.calibration.published import PublishedRun
from planner.calibration.site import calibrate_site
from planner.layout import Layout
from planner.profiles import HardwareProfile, load_profiles
from planner.specs import ModelSpec, TrainingSpec

TRUTH = {GEMM_PEAK_EFFICIENCY: 0.6, GEMM_OVERHEAD_US: 8.0, NETWORK_EFFICIENCY: 0.45}
LAYOUTS = [  # (tp, pp, dp): DP across nodes, TP over two nodes, PP across nodes
    (1, 1, 32),
    (2, 1, 32),
    (16, 1, 2),
    (8, 4, 1),
    (8, 2, 4),
    (4, 2, 8),
    (8, 1, 8),
    (2, 4, 8),
]


def _runs(count: int, truth: HardwareProfile) -> list[PublishedRun]:
    runs = []
    for i in range(count):
        tp, pp, dp = LAYOUTS[i % len(LAYOUTS)]
        hidden = 2048 * (1 + (i // len(LAYOUTS)) % 4)  # a new model size each round of layouts
        model = ModelSpec(
            name=f"bench-{hidden}",
            num_layers=32,
            hidden_size=hidden,
            num_attention_heads=hidden // 128,
            vocab_size=32000,
            seq_length=4096,
            gated_mlp=True,
        )
        layout = Layout(tp=tp, pp=pp, dp=dp, sequence_parallel=tp > 1)
        run = PublishedRun(
            id=f"run-{i}",
            group="observations",
            variant="bench",
            gpu_kind="H100",
            model=model,
            training=TrainingSpec(global_batch_size=8 * dp),
            layout=layout,
            num_gpus=layout.world_size,
            tflops_per_gpu=None,
            step_time_s=1.0,
            source="synthetic",
        )
        runs.append(replace(run, step_time_s=predict(run, truth)[1]))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="8,16,32", help="comma-separated run counts (the first is the baseline)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    counts = [int(c) for c in args.runs.split(",")]
    stock = load_profiles()["dgx-h100"]
    truth = with_constants(stock, TRUTH)
    baseline = None
    print(f"{'runs':>5} {'median s':>9} {'x first':>8}  fitted (eta, t0 us, network)")
    for count in counts:
        runs = _runs(count, truth)
        times, report = [], None
        for _ in range(args.repeats):
            started = time.perf_counter()
            report = calibrate_site(stock, runs, "bench")
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        baseline = baseline or median
        assert report is not None
        fitted = ", ".join(f"{c.after:g}" for c in report.constants)
        print(f"{count:>5} {median:>9.2f} {median / baseline:>8.1f}  {fitted}")


if __name__ == "__main__":
    main()
