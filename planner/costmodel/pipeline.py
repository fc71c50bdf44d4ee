"""Pipeline schedules: bubble and in-flight micro-batches.

Sources: Narayanan et al. 2021 (arXiv 2104.04473) Sec. 2.2.1 (1F1B bubble
(p-1)/m) and Sec. 2.2.2 (interleaved bubble (p-1)/(v m), v times the
point-to-point messages); Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4.2.3
and Megatron-LM `theoretical_memory_usage.py` (first stage holds min(p, m)
micro-batches; interleaving multiplies by 1 + (p-1)/(p v)). Megatron-Core
caps every rank's warm-up at the step's m v chunk forwards
(`get_pp_rank_microbatches`: `are_all_microbatches_in_warmup`), so no stage
holds more than the m micro-batches of a step. The last stage
of a 1F1B pipeline runs each micro-batch's backward right after its forward
(Narayanan 2021 Fig. 4, top), so it holds one. A middle stage holds fewer
than the first: Megatron-Core's schedules (`pipeline_parallel/schedules.py`)
warm up rank r with p - r - 1 forwards (1F1B) or 2 (p - r - 1) + (v - 1) p
chunk forwards (interleaved), so rank 1, the most loaded middle stage, holds
one micro-batch (1F1B) or 2/v of one (interleaved) less than rank 0 where
neither warm-up reaches the cap at m (`behind_first_stage`).

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

import numpy as np

from planner.costmodel.candidates import BoolArray, Candidates, FloatArray, IntArray

__all__ = [
    "behind_first_stage",
    "bubble_fraction",
    "bubble_s",
    "in_flight_microbatches",
    "average_stage_forward_s",
    "exposed_sends_s",
    "p2p_messages_per_microbatch",
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
    """Micro-batches whose activations the first stage holds at once, in units of its layers.

    1F1B: min(p, m). Interleaved: min(p + (p - 1)/v, m), that is p (1 + (p - 1)/(p v)) capped at the step's
    m micro-batches (module docstring: with m = p every chunk's forward is in the warm-up). No pipeline: 1.
    Times the stage's layers, this counts every chunk at the stage's average; where an end stage's chunks are
    uneven (`planner.rules.core.rank_chunks`: one short chunk) the first stage holds its short chunk's
    activations 2p - 1 times and the others p times, so the count runs high by up to one chunk per in-flight
    micro-batch group (DeepSeek-V3, pp 8 x vp 4, chunks [1, 2, 2, 2]: 68 layer-activations for 63).
    """
    return np.minimum(_warm_up_stages(c), c.num_microbatches)


def _warm_up_stages(c: Candidates) -> FloatArray:
    """Rank 0's warm-up plus the micro-batch in flight, in stages, before the cap at m (`_warm_up`)."""
    return _warm_up(c.pp, c.vp)


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


def behind_first_stage(c: Candidates) -> FloatArray:
    """Micro-batches the second stage holds fewer than the first: 1 (1F1B) or 2/v (interleaved) fewer
    warm-up forwards, both counts capped at m (`in_flight_microbatches`), so none where m is below both."""
    first = _warm_up_stages(c)
    fewer = np.where(c.vp > 1, 2.0 / c.vp, 1.0)
    m = c.num_microbatches
    return np.asarray(np.minimum(first, m) - np.minimum(first - fewer, m), dtype=np.float64)


def stage_in_flight_microbatches(
    first_stage: FloatArray,
    last_of_pipeline: BoolArray,
    vp: IntArray,
    middle_of_pipeline: BoolArray | bool = False,
    behind_first: FloatArray | float = 0.0,
) -> FloatArray:
    """Micro-batches a stage holds at once: one on the last stage of a 1F1B pipeline; on a middle stage
    (rank 1 stands for them all: it holds the most of them) the first stage's count less `behind_first`
    (`behind_first_stage`); else the first stage's count.

    `first_stage` is `in_flight_microbatches`; `last_of_pipeline` marks the last
    stage of a pipeline with pp > 1. Interleaving (vp > 1) keeps more on the
    last stage too (Korthikanti 2022 Sec. 4.2.3). Broadcasts over all arguments.
    """
    middle = np.where(middle_of_pipeline, first_stage - behind_first, first_stage)
    return np.asarray(np.where(last_of_pipeline & (vp == 1), 1.0, middle), dtype=np.float64)


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
