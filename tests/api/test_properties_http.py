"""Generated valid requests through real HTTP: they reach the search, never get a 5xx, and answers hold.

Schemathesis (test_fuzz.py) draws bodies from the JSON schema, and few of those pass the rules a schema
cannot state (a preset that exists, GPUs that factor, a layout that multiplies to the GPU count). These
hypothesis strategies build requests the way a user does: a built-in preset and profile, a GPU count of
whole servers (or part of one), a batch of small prime factors, optional constraints, any framework and
objective; and estimates of layouts that multiply to the GPU count. Most must be answered 200, and every
200 must satisfy `api.invariants`. Derandomized, so CI sends the same requests every run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.invariants import estimate_invariants, plan_invariants
from api.localserver import local_service
from planner.presets import load_presets
from planner.profiles import load_profiles
from planner.specs import RecomputeModule

PROFILES = load_profiles()
PRESETS = sorted(load_presets())
EXAMPLES = 60
"""Examples per route: ~120 requests, about 30 s on a loaded 2-core machine."""
MIN_ANSWERED = 0.8
"""Share of generated requests that must be answered 200 (the rest: 422 for a rule only the planner knows)."""
STATUSES: Counter[tuple[str, int]] = Counter()

SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    profile = draw(st.sampled_from(sorted(PROFILES)))
    per_node = PROFILES[profile].node.gpus_per_node
    gpus = draw(
        st.one_of(
            st.sampled_from([d for d in (1, 2, 4) if d < per_node]),
            st.sampled_from((1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256)).map(lambda nodes: nodes * per_node),
        )
    )
    return {"profile": profile, "num_gpus": gpus}


batches = st.builds(lambda a, b: 2**a * 3**b, st.integers(0, 11), st.integers(0, 1))
constraints = st.fixed_dictionaries(
    {},
    optional={
        "tp": st.sampled_from([1, 2, 4, 8]),
        "pp": st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=3, unique=True),
        "recompute": st.lists(st.sampled_from(["none", "selective", "full"]), min_size=1, max_size=3, unique=True),
        "sequence_parallel": st.booleans(),
        "zero_stage": st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=2, unique=True),
        "micro_batch_size": st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=2, unique=True),
    },
)
plan_bodies = st.fixed_dictionaries(
    {
        "model": st.builds(lambda p: {"preset": p}, st.sampled_from(PRESETS)),
        "cluster": clusters(),
        "training": st.fixed_dictionaries(
            {"global_batch_size": batches}, optional={"precision": st.sampled_from(["bf16", "fp16"])}
        ),
    },
    optional={
        "constraints": constraints,
        "top_k": st.integers(1, 10),
        "objective": st.sampled_from(["step_time", "gpu_efficiency"]),
        "framework": st.sampled_from(["core", "megatron", "nemo", "torchtitan"]),
    },
)


@st.composite
def estimate_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A layout first (tp within a server), then the cluster it fills exactly."""
    profile = draw(st.sampled_from(sorted(PROFILES)))
    per_node = PROFILES[profile].node.gpus_per_node
    tp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if d <= per_node]))
    pp, cp, dp = draw(st.sampled_from([1, 2, 4, 8, 16])), draw(st.sampled_from([1, 2])), draw(st.integers(1, 64))
    mbs = draw(st.sampled_from([1, 2, 4]))
    layout = {
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "cp": cp,
        "micro_batch_size": mbs,
        "recompute": draw(st.sampled_from(["none", "selective", "full"])),
        "sequence_parallel": tp > 1 and draw(st.booleans()),
        "zero_stage": draw(st.sampled_from([0, 1, 2, 3])),
    }
    if layout["recompute"] == "selective" and draw(st.booleans()):  # a layout's own module set, in any order
        modules = [m.value for m in RecomputeModule]
        layout["recompute_modules"] = draw(st.lists(st.sampled_from(modules), min_size=1, max_size=3, unique=True))
    return {
        "model": {"preset": draw(st.sampled_from(PRESETS))},
        "cluster": {"profile": profile, "num_gpus": tp * pp * dp * cp},
        "training": {"global_batch_size": mbs * dp * draw(st.sampled_from([1, 2, 4, 8, 16, 32]))},
        "layout": layout,
    }


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with local_service() as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client


def _post(http: httpx.Client, route: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The answer's JSON if 200; None for a 4xx problem naming its field; a 5xx or another answer fails."""
    r = http.post(route, json=body)
    STATUSES[route, r.status_code] += 1
    if r.status_code == 200:
        answer: dict[str, Any] = r.json()
        return answer
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", (r.status_code, r.text)
    assert r.json()["detail"], r.text
    return None


@SETTINGS
@given(body=plan_bodies)
def test_generated_plans_reach_the_search_and_hold(http: httpx.Client, body: dict[str, Any]) -> None:
    answer = _post(http, "/v1/plan", body)
    if answer is not None:
        assert answer["search"]["evaluated"] >= 1 or answer["diagnosis"] is not None, answer["search"]
        objective = body.get("objective", "step_time")
        assert plan_invariants(answer, body["cluster"]["num_gpus"], objective) == []


@SETTINGS
@given(body=estimate_bodies())
def test_generated_estimates_answer_and_hold(http: httpx.Client, body: dict[str, Any]) -> None:
    answer = _post(http, "/v1/estimate", body)
    if answer is not None:
        assert estimate_invariants(answer, body["layout"]) == []


@pytest.mark.parametrize("route", ["/v1/plan", "/v1/estimate"])
def test_most_generated_requests_were_answered(route: str) -> None:
    sent = sum(n for (r, _), n in STATUSES.items() if r == route)
    if not sent:
        pytest.skip("the generating tests did not run in this session")
    answered = STATUSES[route, 200]
    print(f"{route}: {answered} of {sent} generated requests answered 200")
    assert answered >= MIN_ANSWERED * sent, f"{route}: {answered} of {sent} answered 200; {dict(STATUSES)}"
