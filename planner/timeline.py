"""The pipeline schedule of one step, simulated and drawn as SVG (one drawing for the CLI, the API and the page).

The schedules are Megatron-LM's: 1F1B (PipeDream-Flush, Narayanan et al. 2021
Sec. 2.2.1) and interleaved 1F1B (Sec. 2.2.2), with each rank's order of
forward and backward passes as Megatron issues them, and a pass starting when
its rank is free and its input has arrived. With uniform pass times the
simulated bubble is the paper's (p - 1)/m, or (p - 1)/(v m) interleaved.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from planner.rules import interleave_problem

__all__ = ["MAX_DRAWN_MICROBATCHES", "Pass", "Schedule", "schedule", "schedule_svg"]

MAX_DRAWN_MICROBATCHES = 24
"""Past this the drawing shows a shorter step with the same warm-up and cool-down, and says so."""
MAX_SIMULATED_PASSES = 100_000
"""Bound on the passes one drawing simulates (2 x pp x vp x micro-batches drawn)."""


@dataclass(frozen=True, slots=True)
class Pass:
    rank: int
    microbatch: int
    chunk: int
    backward: bool
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Schedule:
    pp: int
    vp: int
    num_microbatches: int
    passes: list[Pass]

    @property
    def makespan(self) -> float:
        return max(p.end for p in self.passes)

    def busy(self, rank: int) -> float:
        return sum(p.end - p.start for p in self.passes if p.rank == rank)


def _order(rank: int, pp: int, vp: int, m: int) -> list[tuple[bool, int, int]]:
    """(backward, microbatch, chunk) in the order Megatron issues them on `rank`."""

    def op(k: int, backward: bool) -> tuple[bool, int, int]:
        group, within = divmod(k, pp * vp)
        chunk = within // pp
        return backward, group * pp + within % pp, (vp - 1 - chunk) if backward else chunk

    total = m * vp
    if vp == 1:
        warmup = min(pp - rank - 1, m)
    else:
        warmup = min((pp - rank - 1) * 2 + (vp - 1) * pp, total)
    order = [op(k, False) for k in range(warmup)]
    for k in range(total - warmup):
        order += [op(warmup + k, False), op(k, True)]
    order += [op(k, True) for k in range(total - warmup, total)]
    return order


def schedule(pp: int, vp: int, num_microbatches: int, forward_s: float = 1.0, backward_s: float = 2.0) -> Schedule:
    """Simulate one step: each pass starts when its rank is free and its input pass has finished.

    `forward_s` and `backward_s` are one micro-batch's times on a stage (all its chunks);
    with interleaving each chunk takes 1/vp of them.
    """
    assert pp >= 1 and vp >= 1 and num_microbatches >= 1
    if (problem := interleave_problem(num_microbatches, pp, vp)) is not None:
        raise ValueError(problem)
    f, b = forward_s / vp, backward_s / vp
    orders = [_order(r, pp, vp, num_microbatches) for r in range(pp)]
    done: dict[tuple[bool, int, int, int], float] = {}
    free = [0.0] * pp
    position = [0] * pp
    passes: list[Pass] = []
    while any(position[r] < len(orders[r]) for r in range(pp)):
        progressed = False
        for r in range(pp):
            if position[r] == len(orders[r]):
                continue
            backward, mb, chunk = orders[r][position[r]]
            ready = _input_ready(done, r, backward, mb, chunk, pp, vp)
            if ready is None:
                continue
            start = max(free[r], ready)
            end = start + (b if backward else f)
            done[(backward, mb, chunk, r)] = end
            passes.append(Pass(r, mb, chunk, backward, start, end))
            free[r], position[r], progressed = end, position[r] + 1, True
        assert progressed, "schedule deadlocked: the pass orders are inconsistent"
    return Schedule(pp=pp, vp=vp, num_microbatches=num_microbatches, passes=passes)


def _input_ready(
    done: dict[tuple[bool, int, int, int], float], r: int, backward: bool, mb: int, chunk: int, pp: int, vp: int
) -> float | None:
    """When the pass's input is available (None: not yet produced)."""
    if not backward:
        if r > 0:
            return done.get((False, mb, chunk, r - 1))
        return 0.0 if chunk == 0 else done.get((False, mb, chunk - 1, pp - 1))
    own_forward = done.get((False, mb, chunk, r))
    if own_forward is None:
        return None
    if r < pp - 1:
        upstream = done.get((True, mb, chunk, r + 1))
    elif chunk < vp - 1:
        upstream = done.get((True, mb, chunk + 1, 0))
    else:
        upstream = own_forward
    return None if upstream is None else max(own_forward, upstream)


_FORWARD = ("#4e79a7", "#76b7e5", "#2c5d8a", "#a0cbe8")
_BACKWARD = ("#f28e2b", "#ffbe7d", "#c7661b", "#ffd9a8")


def schedule_svg(
    pp: int, vp: int, num_microbatches: int, forward_s: float = 1.0, backward_s: float = 2.0, width: int = 960
) -> str:
    """The schedule as a standalone SVG: one row per pipeline rank, idle time left blank (the bubble)."""
    drawn = num_microbatches
    if num_microbatches > MAX_DRAWN_MICROBATCHES:
        drawn = max(pp, (MAX_DRAWN_MICROBATCHES // pp) * pp) if vp > 1 else MAX_DRAWN_MICROBATCHES
    if 2 * pp * vp * drawn > MAX_SIMULATED_PASSES:
        raise ValueError(
            f"2 * pp({pp}) * vp({vp}) * {drawn} micro-batches = {2 * pp * vp * drawn} passes to draw"
            f" > {MAX_SIMULATED_PASSES}"
        )
    s = schedule(pp, vp, drawn, forward_s, backward_s)
    row, top, left = 22, 28, 64
    height = top + row * pp + 26
    scale = (width - left - 10) / s.makespan
    caption = escape(_caption(pp, vp, num_microbatches, drawn))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" class="pipeline-timeline" data-pp="{pp}" data-vp="{vp}">',
        f"<title>{caption}</title>",
        f'<text x="{left}" y="16" font-size="12" font-family="sans-serif">{caption}</text>',
    ]
    for r in range(pp):
        y = top + r * row
        parts.append(
            f'<g class="rank" data-rank="{r}"><text x="4" y="{y + 15}" font-size="11" font-family="sans-serif">'
            f"rank {r}</text>"
            f'<rect x="{left}" y="{y}" width="{width - left - 10}" height="{row - 4}" fill="#eeeeee"/>'
        )
        for p, count, end in _visible_runs([p for p in s.passes if p.rank == r], scale):
            colors = _BACKWARD if p.backward else _FORWARD
            kind = "B" if p.backward else "F"
            label = f"{kind} micro-batch {p.microbatch}{f' chunk {p.chunk}' if vp > 1 else ''}"
            if count > 1:
                label = f"{count} {kind} passes from micro-batch {p.microbatch}"
            parts.append(
                f'<rect class="pass {kind.lower()}" x="{left + p.start * scale:.2f}" y="{y}" '
                f'width="{max((end - p.start) * scale - 0.5, 0.5):.2f}" height="{row - 4}" '
                f'fill="{colors[p.chunk % len(colors)]}"><title>{label}</title></rect>'
            )
        parts.append("</g>")
    legend_y = top + row * pp + 16
    parts.append(
        f'<text x="{left}" y="{legend_y}" font-size="11" font-family="sans-serif">'
        "blue: forward, orange: backward (shade: model chunk); grey: idle (the bubble)</text></svg>"
    )
    return "".join(parts)


def _visible_runs(passes: list[Pass], scale: float) -> list[tuple[Pass, int, float]]:
    """Passes of one rank as drawn: neighbours of the same kind closer than a pixel merge into one run.

    Returns (first pass, passes in the run, end of the run); the count of runs stays within
    about twice the drawing's width in pixels, whatever the schedule's size.
    """
    runs: list[tuple[Pass, int, float]] = []
    for p in sorted(passes, key=lambda x: x.start):
        if runs:
            first, count, end = runs[-1]
            tiny = (end - first.start) * scale < 2 or (p.end - p.start) * scale < 2
            if first.backward == p.backward and tiny and (p.start - end) * scale < 1:
                runs[-1] = (first, count + 1, p.end)
                continue
        runs.append((p, 1, p.end))
    return runs


def _caption(pp: int, vp: int, m: int, drawn: int) -> str:
    text = f"pp={pp}, vp={vp}, {m} micro-batches per step"
    if drawn < m:
        text += f" (drawn with {drawn}: same warm-up and cool-down, shorter steady state)"
    return text
