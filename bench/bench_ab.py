"""Paired speed comparison of `plan()` in two checkouts, interleaved so that machine noise cancels.

Run: python bench/bench_ab.py --base PATH [--work PATH] [--case a|b|c] [--pairs N]

On a shared 2-core machine the speed of the same code drifts by up to 2x within
minutes, so two medians taken one after the other cannot be compared. This
starts one worker process per checkout (each importing the planner from its
own tree), warms both, then asks them for one plan at a time, alternating which
goes first, and prints each side's median and best together with the median
of the per-pair ratios (work / base): a pair runs within a few hundred
milliseconds, under the same load. Make the base checkout with
`git worktree add /tmp/base <commit>`. The cases are bench_plan.py's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def _worker() -> None:
    sys.path.insert(0, str(HERE.parent))
    from bench_plan import CASES, _case  # the same cases, from whichever tree runs this worker

    from planner.profiles import ClusterSpec, load_profiles
    from planner.search.plan import plan
    from planner.specs import TrainingSpec

    profiles = load_profiles()
    args = {}
    for name, preset, seq, profile, gpus, batch, constraints in CASES:
        key = name[1]
        args[key] = (_case(preset, seq), ClusterSpec(profile=profiles[profile], num_gpus=gpus), batch, constraints)
    print("ready", flush=True)
    for line in sys.stdin:
        model, cluster, batch, constraints = args[line.strip()]
        training = TrainingSpec(global_batch_size=batch)
        start = time.perf_counter()
        plan(model, cluster, training, constraints)
        print(f"{time.perf_counter() - start:.6f}", flush=True)


def _start(tree: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    worker = tree / "bench" / "bench_ab.py"
    script = worker if worker.exists() else HERE  # an older checkout without this file uses this one's worker
    proc = subprocess.Popen(
        [sys.executable, str(script), "--worker"],
        cwd=tree,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"the worker for {tree} did not start")
    return proc


def _one(proc: subprocess.Popen[str], case: str) -> float:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(case + "\n")
    proc.stdin.flush()
    return float(proc.stdout.readline())


def main() -> None:
    if "--worker" in sys.argv:
        _worker()
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare against")
    parser.add_argument("--work", type=Path, default=HERE.parent.parent, help="default: this checkout")
    parser.add_argument("--case", default="a", choices=["a", "b", "c"])
    parser.add_argument("--pairs", type=int, default=30)
    args = parser.parse_args()
    base, work = _start(args.base.resolve()), _start(args.work.resolve())
    for proc in (base, work):
        _one(proc, args.case)  # the first plan warms imports and caches
    times: dict[str, list[float]] = {"base": [], "work": []}
    for i in range(args.pairs):
        order = [("base", base), ("work", work)] if i % 2 == 0 else [("work", work), ("base", base)]
        for side, proc in order:
            times[side].append(_one(proc, args.case))
    for proc in (base, work):
        proc.kill()
    ratios = [w / b for b, w in zip(times["base"], times["work"], strict=True)]
    b, w = times["base"], times["work"]
    print(
        f"case ({args.case}), {args.pairs} pairs: base median {statistics.median(b) * 1e3:.1f} ms"
        f" (best {min(b) * 1e3:.1f}), work median {statistics.median(w) * 1e3:.1f} ms (best {min(w) * 1e3:.1f});"
        f" paired ratio work/base median {statistics.median(ratios):.3f}"
    )


if __name__ == "__main__":
    main()
