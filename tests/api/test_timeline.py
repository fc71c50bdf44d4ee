"""The simulated pipeline schedule reproduces the paper's bubble, keeps dependencies, and draws one row per rank."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from planner.costmodel.pipeline import bubble_fraction
from planner.timeline import MAX_DRAWN_MICROBATCHES, schedule, schedule_svg

CASES = [(1, 1, 4), (2, 1, 2), (4, 1, 8), (4, 2, 8), (8, 1, 3), (8, 3, 24), (3, 2, 6), (16, 4, 32)]


@pytest.mark.parametrize(("pp", "vp", "m"), CASES, ids=[f"p{p}-v{v}-m{m}" for p, v, m in CASES])
def test_bubble_equals_the_paper(pp: int, vp: int, m: int) -> None:
    s = schedule(pp, vp, m, forward_s=1.0, backward_s=2.0)
    ideal = m * 3.0
    # Narayanan 2021: bubble / ideal = (p - 1) / m, and (p - 1) / (v m) interleaved (m >= p).
    expected = (pp - 1) / m if m < pp else float(bubble_fraction(pp, vp, m))
    assert (s.makespan - ideal) / ideal == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("pp", "vp", "m"), CASES, ids=[f"p{p}-v{v}-m{m}" for p, v, m in CASES])
def test_every_pass_once_in_order(pp: int, vp: int, m: int) -> None:
    s = schedule(pp, vp, m)
    end = {(p.backward, p.microbatch, p.chunk, p.rank): p.end for p in s.passes}
    assert len(end) == len(s.passes) == 2 * pp * vp * m
    for p in s.passes:
        if not p.backward and p.rank > 0:
            assert p.start >= end[(False, p.microbatch, p.chunk, p.rank - 1)]
        if p.backward:
            assert p.start >= end[(False, p.microbatch, p.chunk, p.rank)]
            if p.rank < pp - 1:
                assert p.start >= end[(True, p.microbatch, p.chunk, p.rank + 1)]
    for r in range(pp):
        spans = sorted((p.start, p.end) for p in s.passes if p.rank == r)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:], strict=False))


def test_interleaving_needs_divisible_microbatches() -> None:
    with pytest.raises(ValueError, match="num_microbatches"):
        schedule(4, 2, 6)


def test_svg_has_one_row_per_rank_and_summarises_long_steps() -> None:
    svg = schedule_svg(8, 2, 96, 1.0, 2.2)
    assert len(re.findall(r'class="rank"', svg)) == 8
    assert "drawn with" in svg and "96 micro-batches" in svg
    drawn = len(re.findall(r'class="pass f"', svg))
    # 24 micro-batches drawn (the largest multiple of pp within MAX_DRAWN_MICROBATCHES), 2 chunks, 8 ranks.
    assert MAX_DRAWN_MICROBATCHES == 24 and drawn == 8 * 2 * 24
    assert "drawn with" not in schedule_svg(4, 1, 8)


def test_timeline_route(client: TestClient) -> None:
    r = client.get("/v1/timeline.svg", params={"pp": 4, "vp": 2, "num_microbatches": 8})
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    assert r.text.count('class="rank"') == 4
    bad = client.get("/v1/timeline.svg", params={"pp": 4, "vp": 2, "num_microbatches": 6})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["num_microbatches"]
    assert client.get("/v1/timeline.svg", params={"pp": 0, "num_microbatches": 6}).status_code == 422


def test_huge_schedules_are_refused_or_summarised(client: TestClient) -> None:
    refused = client.get("/v1/timeline.svg", params={"pp": 128, "vp": 8, "num_microbatches": 128})
    assert refused.status_code == 422 and "too large to draw" in refused.json()["detail"]
    assert client.get("/v1/timeline.svg", params={"pp": 512, "num_microbatches": 512}).status_code == 422
    big = schedule_svg(256, 1, 4096)
    # Sub-pixel neighbours merge: the drawing stays within a few rectangles per pixel column and row.
    assert big.count("<rect") < 256 * 40
