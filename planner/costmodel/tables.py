"""Step time and peak memory of many candidates from per-key tables: the search's fast path.

For a fixed layer-level key (`costmodel.shared`), which also fixes the
micro-batch count m, a candidate's interleaving depth enters only through the
pipeline sends and the bubble; its ZeRO stage selects among four precomputed
data-parallel and optimizer times; its peak memory is, per stage, a fixed part
(by ZeRO stage) plus a part per micro-batch in flight, or its optimizer-step
bytes where those are larger. The tables are the cost model itself evaluated at
the key's m, at each ZeRO stage and at in flight = 0 and 1, and the grid
assembles them with the reference path's own functions (`step.step_time_s`, `pipeline.p2p_messages_per_microbatch`,
`pipeline.stage_in_flight_microbatches`), so no formula is written twice;
`estimate_steps` stays the reference, and a test checks the two agree.

`grid_step_time_and_peak` evaluates a block of rows (layouts without their
modes) against every mode at once: terms that do not depend on the ZeRO stage
are computed once per (row, recompute, sequence-parallel) pair and only the
final sums are spread over the ZeRO stages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.costmodel.candidates import BoolArray, Candidates, FloatArray, IntArray
from planner.costmodel.comm import pp_comm_per_microbatch_s
from planner.costmodel.memory import step_can_peak, step_memory, training_memory
from planner.costmodel.pipeline import (
    behind_first_stage,
    in_flight_microbatches,
    p2p_messages_per_microbatch,
    stage_in_flight_microbatches,
)
from planner.costmodel.shared import LayerQuantities
from planner.costmodel.step import once_per_step_s, step_time_s
from planner.numerics import training_numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["KeyTables", "grid_step_time_and_peak", "key_tables"]

ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True, slots=True)
class KeyTables:
    """Per layer-level key (rows) and, where it matters, per ZeRO stage (columns)."""

    critical_path_s: FloatArray
    """One micro-batch on the slowest stage (`LayerSeconds.critical_path_s`), pipeline sends excluded."""
    average_stage_s: FloatArray
    p2p_message_s: FloatArray
    """One point-to-point send of a micro-batch's activations (zero without a pipeline)."""
    once_per_step_s: FloatArray
    """(ZeRO stage, key): exposed data-parallel seconds at the key's micro-batch count plus the optimizer step."""
    memory_fixed: FloatArray
    """(stage kind, ZeRO stage, key): forward/backward bytes with no micro-batch in flight."""
    memory_per_in_flight: FloatArray
    """(stage kind, key): bytes per micro-batch in flight."""
    memory_step: FloatArray | None
    """(stage kind, ZeRO stage, key): bytes at the optimizer step (`memory.step_memory`); None where the step
    cannot be the peak (`memory.step_can_peak`)."""
    last_of_pipeline: BoolArray
    """(stage kind, key): the last stage of a pipeline (`pipeline.stage_in_flight_microbatches`)."""
    middle_of_pipeline: BoolArray
    """(stage kind, key): a middle stage of a pipeline (`pipeline.behind_first_stage`)."""


def key_tables(
    model: ModelSpec, training: TrainingSpec, keys: Candidates, q: LayerQuantities, hw: Hardware
) -> KeyTables:
    """The tables for the key candidates `keys` (vp = 1, zero = 0) and their quantities `q`."""

    def row(a: np.ndarray) -> np.ndarray:
        return a[None, :]

    # The ZeRO stages as a column against the keys as a row: the cost functions broadcast to (ZeRO stage,
    # key), and what does not depend on the stage (activations, compute windows) is computed once per key.
    at = Candidates(**{f: row(getattr(keys, f)) for f in Candidates.__slots__})
    at = replace(at, zero_stage=np.asarray(ZERO_STAGES, dtype=np.int64)[:, None])
    dp_comm, optimizer = once_per_step_s(
        at, q.dp_collectives_s.map(row), q.largest_params.map(row), q.slowest_stage_s.map(row), training, hw
    )
    # Sends per micro-batch are messages x one message; the message count is the row's (it depends on vp).
    messages = p2p_messages_per_microbatch(keys)
    num = training_numerics(training, hw)
    sends = pp_comm_per_microbatch_s(model, keys, q.placement, hw, training.runtime, num)
    per_message = np.divide(sends, messages, out=np.zeros_like(sends), where=messages > 0)
    fixed = [training_memory(at, num, t.map(row), np.zeros((1, len(keys)))).peak for t in q.stage_terms]
    per_in_flight = [  # the in-flight part does not depend on the ZeRO stage (the keys are at stage 0)
        training_memory(keys, num, t, np.ones(len(keys))).peak - at_zero[0]
        for t, at_zero in zip(q.stage_terms, fixed, strict=True)
    ]
    step = [step_memory(at, num, t.map(row)).peak for t in q.stage_terms] if step_can_peak(num) else None
    grid = (len(ZERO_STAGES), len(keys))
    return KeyTables(
        critical_path_s=q.slowest_stage_s.critical_path_s,
        average_stage_s=q.average_stage_s,
        p2p_message_s=per_message,
        once_per_step_s=np.broadcast_to(dp_comm + optimizer, grid),
        memory_fixed=np.stack([np.broadcast_to(f, grid) for f in fixed]),
        memory_per_in_flight=np.stack(per_in_flight),
        memory_step=None if step is None else np.stack([np.broadcast_to(x, grid) for x in step]),
        last_of_pipeline=np.stack([t.last_of_pipeline for t in q.stage_terms]),
        middle_of_pipeline=np.stack([t.middle_of_pipeline for t in q.stage_terms]),
    )


def grid_step_time_and_peak(
    tables: KeyTables, rows: Candidates, keys: IntArray, key_of_mode: IntArray, zero: IntArray
) -> tuple[FloatArray, FloatArray]:
    """(step seconds, peak bytes), each (rows, modes), of every row paired with every mode.

    `keys[r, j]` is row r's layer-level key under its j-th (recompute, sequence
    parallel) pair; mode q uses pair `key_of_mode[q]` at ZeRO stage `zero[q]`.
    The step is `step.step_time_s` per (row, pair) without its once-per-step
    parts, which depend on the ZeRO stage and are added per mode from the tables.
    """

    column = (slice(None), None)
    sends = p2p_messages_per_microbatch(rows)[column] * tables.p2p_message_s[keys]
    pipelined = step_time_s(  # per (row, pair); the ZeRO-dependent once-per-step part is added per mode below
        rows.num_microbatches[column].astype(np.float64),
        rows.pp[column],
        rows.vp[column],
        tables.critical_path_s[keys],
        sends,
        tables.average_stage_s[keys],
        0.0,
    )
    flat_by_zero = keys[:, key_of_mode] + zero[None, :] * tables.average_stage_s.shape[0]
    step = pipelined[:, key_of_mode] + np.take(tables.once_per_step_s, flat_by_zero)
    in_flight_first = in_flight_microbatches(rows)[:, None]
    behind, vp = behind_first_stage(rows)[:, None], rows.vp[:, None]
    peak = None
    for k in range(tables.memory_fixed.shape[0]):
        in_flight = stage_in_flight_microbatches(
            in_flight_first, tables.last_of_pipeline[k][keys], vp, tables.middle_of_pipeline[k][keys], behind
        )
        fixed = np.take(tables.memory_fixed[k], flat_by_zero)
        stage = fixed + (tables.memory_per_in_flight[k][keys] * in_flight)[:, key_of_mode]
        if tables.memory_step is not None:
            stage = np.maximum(stage, np.take(tables.memory_step[k], flat_by_zero))
        peak = stage if peak is None else np.maximum(peak, stage)
    assert peak is not None
    return step, peak
