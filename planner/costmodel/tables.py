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
from planner.costmodel.memory import StageTerms, stage_memory
from planner.costmodel.pipeline import in_flight_microbatches
from planner.costmodel.shared import LAYER_KEYS, LayerQuantities
from planner.costmodel.step import updated_params
from planner.numerics import numerics
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
    """(ZeRO stage, key): exposed data-parallel time at the key's micro-batch count, plus the optimizer step."""
    memory_fixed: FloatArray
    """(stage kind, ZeRO stage, key): bytes with no micro-batch in flight."""
    memory_per_in_flight: FloatArray
    """(stage kind, key): bytes per micro-batch in flight."""
    single_microbatch: BoolArray
    """(stage kind, key): the stage holds one micro-batch under 1F1B."""


def key_tables(model: ModelSpec, train: TrainingSpec, keys: Candidates, q: LayerQuantities, hw: Hardware) -> KeyTables:
    """The tables for the key candidates `keys` (vp = 1, zero = 0) and their quantities `q`."""
    parts = q.slowest_stage_s
    one_chunk = replace(keys, vp=np.ones_like(keys.vp))
    # The ZeRO stages as a column against the keys as a row: the cost functions broadcast to (ZeRO stage,
    # key), and what does not depend on the stage (activations, compute windows) is computed once per key.
    at = Candidates(**{f: getattr(keys, f)[None, :] for f in Candidates.__slots__})
    at = replace(at, zero_stage=np.asarray(ZERO_STAGES, dtype=np.int64)[:, None])
    collectives = {k: v[None, :] for k, v in q.dp_collectives_s.items()}
    exposed = exposed_dp_s(
        data_parallel_times(at, collectives), at, parts["forward"][None, :], parts["backward"][None, :], train.runtime
    )
    largest = (q.largest_params[0][None, :], q.largest_params[1][None, :])
    once = exposed + compute.optimizer_step_time_s(updated_params(at, largest), hw, numerics(train.precision))
    interleaved = replace(at, vp=np.full_like(at.vp, 2))  # stage_memory: in flight exactly as given
    zeros, ones = np.zeros((1, len(keys))), np.ones(len(keys))
    terms = [StageTerms(*(getattr(t, f)[None, :] for f in StageTerms.__slots__)) for t in q.stage_terms]
    fixed = [stage_memory(interleaved, train.precision, t, zeros).peak for t in terms]
    per_in_flight = [  # the in-flight part does not depend on the ZeRO stage (the keys are at stage 0)
        stage_memory(replace(keys, vp=interleaved.vp[0]), train.precision, t, ones).peak - at_zero[0]
        for t, at_zero in zip(q.stage_terms, fixed, strict=True)
    ]
    grid = (len(ZERO_STAGES), len(keys))
    return KeyTables(
        microbatch_s=np.sum([parts[k] for k in LAYER_KEYS], axis=0),
        average_stage_s=parts["average_stage"],
        send_per_chunk_s=pp_comm_per_microbatch_s(
            model, one_chunk, q.placement, hw, train.runtime, numerics(train.precision)
        ),
        once_per_step_s=np.broadcast_to(once, grid),
        memory_fixed=np.stack([np.broadcast_to(f, grid) for f in fixed]),
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
    by_zero = keys[:, key_of_mode] + zero[None, :] * t.microbatch_s.shape[0]
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
