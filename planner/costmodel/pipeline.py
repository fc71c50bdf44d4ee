"""Pipeline schedules: bubble and in-flight micro-batches.

Sources: Narayanan et al. 2021 (arXiv 2104.04473) Sec. 2.2.1 (1F1B bubble
(p-1)/m) and Sec. 2.2.2 (interleaved bubble (p-1)/(v m), v times the
point-to-point messages); Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4.2.3
and Megatron-LM `theoretical_memory_usage.py` (first stage holds min(p, m)
micro-batches; interleaving multiplies by 1 + (p-1)/(p v)). Megatron-Core
caps every rank's warm-up at the step's m v chunk forwards
(`get_pp_rank_microbatches`: `are_all_microbatches_in_warmup`), so no stage
holds more than the m micro-batches of a step. Every stage holds what its
own warm-up leaves in flight: Megatron-Core's schedules
(`pipeline_parallel/schedules.py`) warm up rank r with p - r - 1 forwards
(1F1B) or 2 (p - r - 1) + (v - 1) p chunk forwards (interleaved), so rank 1,
the most loaded middle stage, holds one micro-batch (1F1B) or 2/v of one
(interleaved) less than rank 0, and the last stage one micro-batch (1F1B:
each backward runs right after its forward, Narayanan 2021 Fig. 4, top) or
p - (p - 1)/v (interleaved), counted chunk by chunk where an end rank's
chunks are uneven (`stage_in_flight`).

Point-to-point sends: each micro-batch sends one activation forward and one
gradient backward per model chunk (Narayanan 2021 Sec. 2.2.2). Megatron-Core's
interleaved schedule issues them asynchronously and waits only before the
receiving chunk runs (`overlap_p2p_comm`: Megatron-LM's
`--no-overlap-p2p-communication` turns it off, and it is forced off without
interleaving, `megatron/training/arguments.py`; the Megatron-LM README of July
2024 names PP overlap among its defaults), so a send hides behind the next
chunk's compute; 1F1B's sends block (`exposed_sends_s`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import BoolArray, Candidates, FloatArray, IntArray

__all__ = [
    "InFlight",
    "bubble_fraction",
    "bubble_s",
    "in_flight_microbatches",
    "average_stage_forward_s",
    "exposed_sends_s",
    "p2p_messages_per_microbatch",
    "stage_in_flight",
    "stage_in_flight_microbatches",
    "unpaired_microbatches",
]


def bubble_fraction(pp: FloatArray | int, vp: FloatArray | int, m: FloatArray | int) -> FloatArray:
    """Pipeline bubble as a fraction of ideal compute time: (p - 1) / (v m)."""
    return np.asarray((np.asarray(pp) - 1) / (np.asarray(vp) * np.asarray(m)), dtype=np.float64)


def bubble_s(pp: IntArray, vp: IntArray, stage_microbatch_s: FloatArray) -> FloatArray:
    """Seconds of the pipeline bubble: (p - 1)/v micro-batch times of a stage (Narayanan 2021 Sec. 2.2.1, 2.2.2).

    `stage_microbatch_s` is one micro-batch on an average stage, its point-to-point sends included.
    Broadcasts over all arguments.
    """
    return np.asarray((pp - 1) / vp * stage_microbatch_s, dtype=np.float64)


def in_flight_microbatches(c: Candidates) -> FloatArray:
    """Micro-batches whose activations the first stage holds at once, in units of its layers (`stage_in_flight`)."""
    return stage_in_flight(c).first


@dataclass(frozen=True, slots=True)
class InFlight:
    """Micro-batches each stage kind holds at its peak, in units of that stage's layers (`stage_in_flight`)."""

    first: FloatArray
    middle: FloatArray
    """Rank 1, which holds the most of the middle ranks."""
    last: FloatArray


def stage_in_flight(c: Candidates) -> InFlight:
    """Micro-batches the first, a middle (rank 1) and the last stage hold at their peak, each in units of its own
    layers (its layer activations are priced at the stage's layer count times this).

    Rank r of a pipeline holds its warm-up forwards plus the one in flight (`_held_chunk_forwards`): 1F1B
    min(p - r, m) micro-batches; interleaved min(2 (p - r - 1) + (v - 1) p + 1, m v) chunk forwards, all m v where
    m = p, each chunk forward holding its chunk's layers. With equal chunks that is p + (p - 1)/v micro-batches on
    the first stage (Korthikanti 2022 Sec. 4.2.3), 2/v fewer on rank 1, and p - (p - 1)/v on the last. An end rank
    with one short chunk (`planner.rules.core.rank_chunks`: beside the embedding on the first rank, beside the
    loss on the last) holds its chunks' own layers (`_end_rank_held_layers`). No pipeline: one.
    """
    p, v, m = c.pp.astype(np.float64), c.vp.astype(np.float64), c.num_microbatches.astype(np.float64)
    first_n, middle_n, last_n = (_held_chunk_forwards(p, v, m, rank) for rank in (0.0, 1.0, p - 1))
    return InFlight(  # at v = 1 the forwards are micro-batches and every rank is one chunk: n / v = n
        first=_end_rank_held_layers(first_n, p, v, m, c.first_stage_layers, c.stage_layers, short_first=True),
        middle=np.asarray(middle_n / v, dtype=np.float64),
        last=_end_rank_held_layers(last_n, p, v, m, c.last_stage_layers, c.stage_layers, short_first=False),
    )


def _held_chunk_forwards(p: FloatArray, v: FloatArray, m: FloatArray, rank: FloatArray | float) -> FloatArray:
    """Forwards rank `rank` holds at its peak: micro-batches under 1F1B (min(p - r, m)), chunk forwards when
    interleaved (warm-up 2 (p - r - 1) + (v - 1) p plus the one in flight, at most the step's m v; every one of them
    where m = p). Source: Megatron-Core `pipeline_parallel/schedules.py` (`forward_backward_pipelining_without_
    interleaving`: p - r - 1 warm-up forwards; `get_pp_rank_microbatches`: 2 (p - r - 1) + (v - 1) x
    `microbatch_group_size_per_vp_stage` (default p), capped at m v, all of them when m = p)."""
    interleaved = np.where(m == p, m * v, np.minimum(2 * (p - rank - 1) + (v - 1) * p + 1, m * v))
    return np.asarray(np.where(v > 1, interleaved, np.minimum(p - rank, m)), dtype=np.float64)


def _end_rank_held_layers(
    n: FloatArray, p: FloatArray, v: FloatArray, m: FloatArray, layers: IntArray, most: IntArray, *, short_first: bool
) -> FloatArray:
    """An interleaved end rank's peak in units of its `layers`, its first `n` chunk forwards (`_held_chunk_forwards`)
    holding their chunks' layers: v equal chunks where v divides `layers` (n / v), else v - 1 of a middle rank's
    size (`most` / v) and one short chunk, the rank's first (`short_first`) or its last
    (`planner.rules.core.rank_chunks`).

    Megatron-Core runs chunk forwards in groups of g = min(p, m) micro-batches per chunk (chunk (k mod g v) // g of the
    k-th), so the first n hold the short chunk n_s = g floor(n / g v) + clip(n mod g v - j g, 0, g) times (j its
    index). The first rank peaks at its warm-up's end. The last rank's warm-up ends on the short chunk; after it
    each steady step forwards one chunk before the backward frees one of the same size, so it peaks at its
    warm-up's (v - 1) p forwards plus a full chunk wherever the steady state forwards one (m v - (v - 1) p > g).
    Checked against a step by step replay of the schedule in tests/costmodel/test_pipeline.py."""
    size = np.asarray(layers, dtype=np.float64)
    full = np.floor(np.asarray(most, dtype=np.float64) / v)
    short = size - full * (v - 1)
    # Anything but one short chunk beside v - 1 full ones (equal chunks, or a split the rules refuse) at the average.
    uneven = (np.mod(size, v) != 0) & (full >= 1) & (short >= 0) & (short <= full)
    if not np.any(uneven):  # the common case, and the search's hot path: equal chunks (and 1F1B)
        return np.asarray(n / v, dtype=np.float64)
    index = 0.0 if short_first else v - 1
    group = np.minimum(p, m)  # micro-batches per chunk in a row: p, or all m of a step with fewer

    def held(count: FloatArray) -> FloatArray:
        cycles, rest = np.floor(count / (group * v)), np.mod(count, group * v)
        shorts = cycles * group + np.clip(rest - index * group, 0.0, group)
        return np.asarray(count * full - shorts * (full - short), dtype=np.float64)

    peak = held(n)
    if not short_first:
        warm = np.where(m == p, m * v, np.minimum((v - 1) * p, m * v))
        steady = m * v - warm
        peak = np.where(steady > 0, np.maximum(peak, held(warm) + np.where(steady > group, full, short)), peak)
    return np.asarray(np.where(uneven, peak / np.maximum(size, 1.0), n / v), dtype=np.float64)


def _warm_up(pp: IntArray, vp: IntArray) -> FloatArray:
    """p (1F1B) or (2 (p - 1) + (v - 1) p + 1)/v = p + (p - 1)/v (interleaved) micro-batches."""
    p = np.asarray(pp, dtype=np.float64)
    return np.asarray(np.where(vp > 1, p + (p - 1) / vp, p), dtype=np.float64)


def unpaired_microbatches(pp: IntArray, vp: IntArray, m: FloatArray) -> FloatArray:
    """Micro-batches whose forward and backward the MoE all-to-all overlap runs unpaired on a stage
    (`costmodel.expert_dispatch`): rank 0's warm-up forwards and as many cool-down backwards, in micro-batches.

    Megatron-Core's combined 1F1B (`schedules.py`, with `overlap_moe_expert_parallel_comm`) warms the
    interleaved schedule up with one chunk forward more than without it, 2 (p - 1) + (v - 1) p + 1 of the m v
    chunk passes, p + (p - 1)/v micro-batches (`_warm_up`); without a pipeline
    (`combined_1f1b_schedule_for_no_pipelining`) the first forward and the last backward run alone: one. Capped
    at the step's m. Broadcasts over all arguments.
    """
    return np.asarray(np.minimum(_warm_up(pp, vp), m), dtype=np.float64)


def stage_in_flight_microbatches(
    in_flight: InFlight, last_of_pipeline: BoolArray | bool, middle_of_pipeline: BoolArray | bool = False
) -> FloatArray:
    """Micro-batches a stage holds at once (`stage_in_flight`): the last stage's count where `last_of_pipeline`
    (the last stage of a pipeline with pp > 1), rank 1's on a middle stage, else the first stage's. Broadcasts
    over all arguments."""
    middle = np.where(middle_of_pipeline, in_flight.middle, in_flight.first)
    return np.asarray(np.where(last_of_pipeline, in_flight.last, middle), dtype=np.float64)


def p2p_messages_per_microbatch(pp: IntArray, vp: IntArray) -> FloatArray:
    """Sends on a stage's critical path per micro-batch: one forward, one backward, per model chunk."""
    return np.asarray(np.where(pp > 1, 2.0 * vp, 0.0), dtype=np.float64)


def average_stage_forward_s(layer_forward_s: FloatArray, num_layers: int, pp: IntArray) -> FloatArray:
    """One micro-batch's forward compute over an average stage's layers (num_layers / pp of them): what an
    interleaved stage's sends hide behind (`exposed_sends_s`). Compute only, so no network rate moves it."""
    return np.asarray(layer_forward_s * num_layers / pp, dtype=np.float64)


def exposed_sends_s(
    pp: IntArray, vp: IntArray, message_s: FloatArray, stage_forward_s: FloatArray, overlap_p2p_comm: bool
) -> FloatArray:
    """Point-to-point seconds per micro-batch left on a stage's critical path (module docstring).

    `message_s` is one send (`comm.pp_message_s`), `stage_forward_s` one micro-batch's forward over an
    average stage (`average_stage_forward_s`). Interleaved with `overlap_p2p_comm`, each send hides behind
    one chunk's forward (the shorter of a chunk's passes, `stage_forward_s / vp`) and only what is longer
    shows; otherwise every send blocks. Broadcasts over all arguments: the reference path passes
    candidates, the search's grid rows against their layer-level keys.
    """
    hidden = np.where((vp > 1) & overlap_p2p_comm, stage_forward_s / vp, 0.0)
    return np.asarray(p2p_messages_per_microbatch(pp, vp) * np.maximum(message_s - hidden, 0.0), dtype=np.float64)
