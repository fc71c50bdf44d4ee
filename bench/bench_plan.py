"""Search speed: candidates, median milliseconds per plan, and the ratio against the scalar reference.

Run: python bench/bench_plan.py [--repeats N] [--sample K] [--phases]

The reference is the brute-force path of tests/search/reference.py: one scalar
`estimate()` per legal layout. Running it over hundreds of thousands of layouts
takes minutes, so it is timed on a seeded random sample of K legal candidates
of the same space, in the same run, and scaled to the space's size; the
sample skips the reference's rule checks on illegal layouts, which favours the
reference. Loopback-free, no network, bounded by --repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from planner.constraints.space import Space, build_space
from planner.costmodel.shared import LayerQuantities, layer_quantities
from planner.costmodel.tables import key_tables
from planner.estimate import estimate
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.rules import CORE
from planner.search.baseline import MODERN, PAPER, baseline_candidates
from planner.search.evaluate import Evaluated, evaluate
from planner.search.plan import _top_plans, plan
from planner.search.rank import Objective, rank
from planner.specs import ModelSpec, TrainingSpec

CASES = [
    ("(a) GPT-3 175B, 1024 x A100-80GB, B=1536", "gpt3-175b", None, "dgx-a100-80gb", 1024, 1536, None),
    ("(b) Llama 3 405B, 16384 x H100, s=8192, B=2048, CP", "llama3-405b", 8192, "dgx-h100", 16384, 2048, None),
    ("(c) DeepSeek-V3 671B MoE, 2048 x H100, EP", "deepseek-v3", None, "dgx-h100", 2048, 4096, None),
]


def _case(preset: str, seq: int | None) -> ModelSpec:
    model = get_preset(preset).model
    return model.model_copy(update={"seq_length": seq}) if seq else model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--phases", action="store_true", help="also print where each case's time goes")
    args = parser.parse_args()
    profiles = load_profiles()
    print(f"{'case':52s} {'candidates':>10s} {'median ms':>10s} {'ref ms/cand':>11s} {'ref est. s':>10s} {'ratio':>8s}")
    for name, preset, seq, profile, gpus, batch, constraints in CASES:
        model = _case(preset, seq)
        cluster = ClusterSpec(profile=profiles[profile], num_gpus=gpus)
        training = TrainingSpec(global_batch_size=batch)
        plan(model, cluster, training, constraints)  # warm caches and imports
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = plan(model, cluster, training, constraints)
            times.append(time.perf_counter() - start)
        median_s = statistics.median(times)
        candidates = build_space(model, training, gpus, {}).candidates
        rng = np.random.default_rng(0)
        sample = rng.choice(len(candidates), size=min(args.sample, len(candidates)), replace=False)
        layouts = [candidates.layout(int(i), model.num_layers) for i in sample]
        start = time.perf_counter()
        for layout in layouts:
            estimate(model, cluster, training, layout)
        per_candidate_s = (time.perf_counter() - start) / len(sample)
        reference_s = per_candidate_s * result.search.candidates
        print(
            f"{name:52s} {result.search.candidates:>10,d} {median_s * 1e3:>10.1f} {per_candidate_s * 1e3:>11.3f}"
            f" {reference_s:>10.1f} {reference_s / median_s:>7.0f}x"
        )
        if args.phases:
            phases = _phases(model, cluster, training, args.repeats)
            print("    " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()) + " (ms)")


def _median_ms(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, out


def _phases(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, repeats: int) -> dict[str, float]:
    """Median ms of each phase of an unconstrained step-time plan (planner/search/plan.py)."""
    hw = cluster.profile.hardware(training.precision)
    ms: dict[str, float] = {}
    ms["space"], space = _median_ms(lambda: build_space(model, training, cluster.num_gpus, {}), repeats)
    assert isinstance(space, Space)
    keys = space.layer_keys
    ms["layer quantities"], q = _median_ms(lambda: layer_quantities(model, training, keys, hw), repeats)
    assert isinstance(q, LayerQuantities)
    ms["key tables"], _ = _median_ms(lambda: key_tables(model, training, keys, q, hw), repeats)
    evaluate_ms, ev = _median_ms(lambda: evaluate(model, training, space, hw), repeats)
    assert isinstance(ev, Evaluated)
    ms["grid"] = evaluate_ms - ms["layer quantities"] - ms["key tables"]
    ms["rank"], order = _median_ms(lambda: rank(ev, hw.hbm_bytes, Objective.STEP_TIME, top=10), repeats)
    assert isinstance(order, np.ndarray)
    ms["baselines"], found = _median_ms(
        lambda: [baseline_candidates(model, training, cluster.num_gpus, hw, ev, CORE, r) for r in (PAPER, MODERN)],
        repeats,
    )
    assert isinstance(found, list)
    also = tuple(f[0].layout(f[1], model.num_layers) for f in found if f is not None)
    ms["shortlist + baseline estimates + CP-SAT"], _ = _median_ms(
        lambda: _top_plans(model, training, cluster, hw, ev, order, 10, Objective.STEP_TIME, True, also=also), repeats
    )
    return ms


if __name__ == "__main__":
    main()
