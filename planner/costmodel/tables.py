"""Step time and peak memory of many candidates from per-key tables: the search's fast path.

For a fixed layer-level key (`costmodel.shared`), a candidate's step time is
affine in its micro-batch count m and its interleaving depth enters only
through the pipeline sends and the bubble; its ZeRO stage selects among four
precomputed data-parallel and optimizer times; its peak memory is, per stage,
a fixed part (by ZeRO stage) plus a part per micro-batch in flight. The tables
are the cost model itself evaluated at those corners (m = 0 and 1, in flight
= 0 and 1, each ZeRO stage), so no formula is written twice; `estimate_steps`
stays the reference, and a test checks the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.costmodel import compute
from planner.costmodel.candidates import BoolArray, Candidates, FloatArray, IntArray
from planner.costmodel.comm import pp_comm_per_microbatch_s
from planner.costmodel.data_parallel import data_parallel_times, exposed_dp_s
from planner.costmodel.memory import stage_memory
from planner.costmodel.pipeline import in_flight_microbatches
from planner.costmodel.shared import LAYER_KEYS, LayerQuantities
from planner.costmodel.step import updated_params
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["KeyTables", "key_tables", "step_time_and_peak"]

ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True, slots=True)
class KeyTables:
    """Per layer-level key (rows) and, where it matters, per ZeRO stage (columns)."""

    microbatch_s: FloatArray
    """One micro-batch on the slowest stage, pipeline sends excluded."""
    average_stage_s: FloatArray
    send_per_chunk_s: FloatArray
    """Pipeline sends of one micro-batch per model chunk (zero without a pipeline)."""
    dp_step_s: FloatArray
    dp_microbatch_s: FloatArray
    optimizer_s: FloatArray
    memory_fixed: FloatArray
    """(stage kind, key, ZeRO stage): bytes with no micro-batch in flight."""
    memory_per_in_flight: FloatArray
    """(stage kind, key): bytes per micro-batch in flight."""
    single_microbatch: BoolArray
    """(stage kind, key): the stage holds one micro-batch under 1F1B."""


def key_tables(model: ModelSpec, train: TrainingSpec, keys: Candidates, q: LayerQuantities, hw: Hardware) -> KeyTables:
    """The tables for the key candidates `keys` (vp = 1, zero = 0) and their quantities `q`."""
    parts = q.slowest_stage_s
    one_chunk = replace(keys, vp=np.ones_like(keys.vp))
    dp_step, dp_mb, optimizer, fixed = [], [], [], []
    interleaved = replace(keys, vp=np.full_like(keys.vp, 2))  # stage_memory: in flight exactly as given
    zeros, ones = np.zeros(len(keys)), np.ones(len(keys))
    for z in ZERO_STAGES:
        at = [
            replace(keys, zero_stage=np.full_like(keys.zero_stage, z), num_microbatches=np.full_like(keys.tp, m))
            for m in (0, 1)
        ]
        exposed = [
            exposed_dp_s(
                data_parallel_times(c, q.dp_collectives_s), c, parts["forward"], parts["backward"], train.runtime
            )
            for c in at
        ]
        dp_step.append(exposed[0])
        dp_mb.append(exposed[1] - exposed[0])
        optimizer.append(compute.optimizer_step_time_s(updated_params(at[0], q.largest_params), hw))
        zc = replace(interleaved, zero_stage=np.full_like(keys.zero_stage, z))
        fixed.append([stage_memory(zc, train.precision, t, zeros).peak for t in q.stage_terms])
    per_in_flight = [
        stage_memory(interleaved, train.precision, t, ones).peak
        - stage_memory(interleaved, train.precision, t, zeros).peak
        for t in q.stage_terms
    ]
    return KeyTables(
        microbatch_s=np.sum([parts[k] for k in LAYER_KEYS], axis=0),
        average_stage_s=parts["average_stage"],
        send_per_chunk_s=pp_comm_per_microbatch_s(model, one_chunk, q.placement, hw, train.runtime),
        dp_step_s=np.stack(dp_step, axis=1),
        dp_microbatch_s=np.stack(dp_mb, axis=1),
        optimizer_s=np.stack(optimizer, axis=1),
        memory_fixed=np.stack([np.stack(f_z, axis=0) for f_z in fixed], axis=2),
        memory_per_in_flight=np.stack(per_in_flight),
        single_microbatch=np.stack([t.single_microbatch for t in q.stage_terms]),
    )


def step_time_and_peak(t: KeyTables, key: IntArray, c: Candidates) -> tuple[FloatArray, FloatArray]:
    """(step seconds, peak bytes) of candidates `c` whose keys are rows `key` of the tables."""
    z = c.zero_stage
    in_flight_first = in_flight_microbatches(c)
    one_chunk = c.vp == 1
    peak = None
    for k in range(t.memory_fixed.shape[0]):
        in_flight = np.where(t.single_microbatch[k, key] & one_chunk, 1.0, in_flight_first)
        stage = t.memory_fixed[k, key, z] + t.memory_per_in_flight[k, key] * in_flight
        peak = stage if peak is None else np.maximum(peak, stage)
    assert peak is not None
    m = c.num_microbatches.astype(np.float64)
    sends = c.vp * t.send_per_chunk_s[key]
    step = (
        m * (t.microbatch_s[key] + sends)
        + (c.pp - 1) / c.vp * (t.average_stage_s[key] + sends)
        + t.dp_step_s[key, z]
        + m * t.dp_microbatch_s[key, z]
        + t.optimizer_s[key, z]
    )
    return step, peak
