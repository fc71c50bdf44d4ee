"""Search speed: candidates, median milliseconds per plan, and the ratio against the scalar reference.

Run: python bench/bench_plan.py [--repeats N] [--sample K]

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

import numpy as np

from planner.constraints.space import build_space
from planner.estimate import estimate
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.search.plan import plan
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


if __name__ == "__main__":
    main()
