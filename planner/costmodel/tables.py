"""Step time and peak memory of many candidates from per-key tables: the search's fast path.

For a fixed layer-level key (`costmodel.shared`), which also fixes the
micro-batch count m, a candidate's interleaving depth enters only through the
pipeline sends and the bubble; its ZeRO stage selects among four precomputed
data-parallel and optimizer times; its peak memory is, per stage, a fixed part
(by ZeRO stage) plus a part per micro-batch in flight. The tables are the cost
model itself evaluated at the key's m, at each ZeRO stage and at in flight = 0
and 1, so no formula is written twice; `estimate_steps` stays the
reference, and a test checks the two agree.

`grid_step_time_and_peak` evaluates a block of rows (layouts without their
modes) against every mode at once: terms that do not depend on the ZeRO stage
are computed once per (row, recompute, sequence-parallel) pair and only the
final sums are spread over the ZeRO stages.
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

__all__ = ["KeyTables", "grid_step_time_and_peak", "key_tables"]

ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True, slots=True)
class KeyTables:
    """Per layer-level key (rows) and, where it matters, per ZeRO stage (columns)."""

    microbatch_s: FloatArray
    """One micro-batch on the slowest stage, pipeline sends excluded."""
    average_stage_s: FloatArray
    send_per_chunk_s: FloatArray
    """Pipeline sends of one micro-batch per model chunk (zero without a pipeline)."""
    once_per_step_s: FloatArray
    """(key, ZeRO stage): exposed data-parallel time at the key's micro-batch count, plus the optimizer step."""
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
    once, fixed = [], []
    interleaved = replace(keys, vp=np.full_like(keys.vp, 2))  # stage_memory: in flight exactly as given
    zeros, ones = np.zeros(len(keys)), np.ones(len(keys))
    for z in ZERO_STAGES:
        at = replace(keys, zero_stage=np.full_like(keys.zero_stage, z))
        dp = data_parallel_times(at, q.dp_collectives_s)
        exposed = exposed_dp_s(dp, at, parts["forward"], parts["backward"], train.runtime)
        once.append(exposed + compute.optimizer_step_time_s(updated_params(at, q.largest_params), hw))
        zc = replace(interleaved, zero_stage=at.zero_stage)
        fixed.append([stage_memory(zc, train.precision, t, zeros).peak for t in q.stage_terms])
    per_in_flight = [  # fixed[0]: the keys are at ZeRO stage 0
        stage_memory(interleaved, train.precision, t, ones).peak - at_zero
        for t, at_zero in zip(q.stage_terms, fixed[0], strict=True)
    ]
    return KeyTables(
        microbatch_s=np.sum([parts[k] for k in LAYER_KEYS], axis=0),
        average_stage_s=parts["average_stage"],
        send_per_chunk_s=pp_comm_per_microbatch_s(model, one_chunk, q.placement, hw, train.runtime),
        once_per_step_s=np.stack(once, axis=1),
        memory_fixed=np.stack([np.stack(f_z, axis=0) for f_z in fixed], axis=2),
        memory_per_in_flight=np.stack(per_in_flight),
        single_microbatch=np.stack([t.single_microbatch for t in q.stage_terms]),
    )


def grid_step_time_and_peak(
    t: KeyTables, rows: Candidates, keys: IntArray, key_of_mode: IntArray, zero: IntArray
) -> tuple[FloatArray, FloatArray]:
    """(step seconds, peak bytes), each (rows, modes), of every row paired with every mode.

    `keys[r, j]` is row r's layer-level key under its j-th (recompute, sequence
    parallel) pair; mode q uses pair `key_of_mode[q]` at ZeRO stage `zero[q]`.
    The pipeline part is Narayanan et al. 2021 Eq. 1 generalised: m micro-batches
    on the slowest stage plus the (p - 1)/v bubble of average stages (Sec. 2.2.2),
    each with its v point-to-point sends per micro-batch.
    """
    m = rows.num_microbatches[:, None].astype(np.float64)
    vp = rows.vp[:, None]
    sends = vp * t.send_per_chunk_s[keys]
    pipeline = m * (t.microbatch_s[keys] + sends) + (rows.pp[:, None] - 1) / vp * (t.average_stage_s[keys] + sends)
    by_zero = keys[:, key_of_mode] * len(ZERO_STAGES) + zero[None, :]
    step = pipeline[:, key_of_mode] + np.take(t.once_per_step_s, by_zero)
    in_flight_first = in_flight_microbatches(rows)[:, None]
    one_chunk = (rows.vp == 1)[:, None]
    peak = None
    for k in range(t.memory_fixed.shape[0]):
        in_flight = np.where(t.single_microbatch[k][keys] & one_chunk, 1.0, in_flight_first)
        stage = np.take(t.memory_fixed[k], by_zero) + (t.memory_per_in_flight[k][keys] * in_flight)[:, key_of_mode]
        peak = stage if peak is None else np.maximum(peak, stage)
    assert peak is not None
    return step, peak
