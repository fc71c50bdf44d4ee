"""Step time and peak memory of many candidates from per-key tables: the search's fast path.

For a fixed layer-level key (`costmodel.shared`), which also fixes the
micro-batch count m, a candidate's interleaving depth enters only through the
pipeline sends and the bubble; its ZeRO stage selects among four precomputed
data-parallel and optimizer times; its peak memory is, per stage, a fixed part
(by ZeRO stage) plus a part per micro-batch in flight, or its optimizer-step
bytes where those are larger. The tables are the cost model itself evaluated at
the key's m, at each ZeRO stage and at in flight = 0 and 1, and the grid
assembles them with the reference path's own functions (`step.step_time_s`, `pipeline.exposed_sends_s`,
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
from planner.costmodel.comm import pp_message_s
from planner.costmodel.memory import activation_side_bytes, resident_state_bytes, step_can_peak, step_memory
from planner.costmodel.pipeline import (
    InFlight,
    average_stage_forward_s,
    exposed_sends_s,
    stage_in_flight,
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
    """Per layer-level key (first axis) and, where it matters, per ZeRO stage (last axis, `ZERO_STAGES`).

    Laid out key-first so that gathering a block's keys yields contiguous (row, pair, ZeRO stage) blocks.
    """

    critical_path_s: FloatArray
    """One micro-batch on the slowest stage (`LayerSeconds.critical_path_s`), pipeline sends excluded."""
    unpaired_s: FloatArray
    """What an unpaired micro-batch adds there under the MoE all-to-all overlap (`LayerSeconds.ep_unpaired`)."""
    average_stage_s: FloatArray
    p2p_message_s: FloatArray
    """One point-to-point send of a micro-batch's activations (zero without a pipeline)."""
    stage_forward_s: FloatArray
    """One micro-batch's forward over an average stage's layers (`pipeline.average_stage_forward_s`)."""
    overlap_p2p_comm: bool
    """`RuntimeFeatures.overlap_p2p_comm` of the request (`pipeline.exposed_sends_s`)."""
    once_per_step_s: FloatArray
    """(key, ZeRO stage): exposed data-parallel seconds at the key's micro-batch count plus the optimizer step."""
    memory_fixed: FloatArray
    """(stage kind, key, ZeRO stage): forward/backward bytes with no micro-batch in flight."""
    memory_per_in_flight: FloatArray
    """(stage kind, key): bytes per micro-batch in flight."""
    memory_step: FloatArray | None
    """(stage kind, key, ZeRO stage): bytes at the optimizer step (`memory.step_memory`); None where the step
    cannot be the peak (`memory.step_can_peak`)."""
    last_of_pipeline: BoolArray
    """(stage kind, key): the last stage of a pipeline (`pipeline.stage_in_flight_microbatches`)."""
    middle_of_pipeline: BoolArray
    """(stage kind, key): a middle stage of a pipeline (`pipeline.stage_in_flight`: rank 1's count)."""

    def at_zero_stages(self, zeros: IntArray) -> KeyTables:
        """The tables with their ZeRO-stage axis narrowed to `zeros`, in that order."""
        if len(zeros) == len(ZERO_STAGES) and (zeros == np.asarray(ZERO_STAGES)).all():
            return self
        step = None if self.memory_step is None else np.ascontiguousarray(self.memory_step[..., zeros])
        return replace(
            self,
            once_per_step_s=np.ascontiguousarray(self.once_per_step_s[:, zeros]),
            memory_fixed=np.ascontiguousarray(self.memory_fixed[..., zeros]),
            memory_step=step,
        )


def key_tables(
    model: ModelSpec, training: TrainingSpec, keys: Candidates, q: LayerQuantities, hw: Hardware
) -> KeyTables:
    """The tables for the layer keys `keys` (`Space.layer_keys`; vp = 1, zero = 0) and their quantities `q`,
    one table row per key in `Space.layer_candidates` order.

    The ZeRO stages are one more broadcast axis, before the keys' (the row keys stay last, where numpy's
    inner loop runs: `Space.layer_keys`): the cost functions broadcast over (ZeRO stage, key axes), so
    what depends on neither the stage nor the (recompute, sequence parallel) pair, such as the model
    states per row key, is computed once per row key and stage.
    """
    shape, stages = keys.shape, len(ZERO_STAGES)

    def flat(a: np.ndarray) -> np.ndarray:  # one entry per key
        return np.broadcast_to(a, shape).reshape(-1)

    def by_key(a: np.ndarray) -> np.ndarray:  # (key, ZeRO stage)
        return np.ascontiguousarray(np.broadcast_to(a, (stages, *shape)).reshape(stages, -1).T)

    def staged(a: np.ndarray) -> np.ndarray:  # the ZeRO axis prepended
        return np.asarray(a)[None]

    zero = np.asarray(ZERO_STAGES, dtype=np.int64).reshape((stages,) + (1,) * len(shape))
    at = replace(Candidates(**{f: staged(getattr(keys, f)) for f in Candidates.__slots__}), zero_stage=zero)
    dp_comm, optimizer = once_per_step_s(
        model,
        at,
        q.dp_collectives_s.map(staged),
        q.largest_params.map(staged),
        q.slowest_stage_s.map(staged),
        training,
        hw,
    )
    # One send per key; how many a micro-batch sends and how many hide depend on the row's vp (the grid's).
    num = training_numerics(training, hw)
    message = pp_message_s(model, keys, q.placement, hw, training.runtime, num)
    idle = [activation_side_bytes(t, np.zeros(1)) for t in q.stage_terms]
    fixed = [resident_state_bytes(at, num, t.map(staged)) + staged(a) for t, a in zip(q.stage_terms, idle, strict=True)]
    per_in_flight = [activation_side_bytes(t, np.ones(1)) - a for t, a in zip(q.stage_terms, idle, strict=True)]
    step = [step_memory(at, num, t.map(staged)).peak for t in q.stage_terms] if step_can_peak(num) else None
    return KeyTables(
        critical_path_s=flat(q.slowest_stage_s.critical_path_s),
        unpaired_s=flat(q.slowest_stage_s.ep_unpaired),
        average_stage_s=flat(q.average_stage_s),
        p2p_message_s=flat(message),
        stage_forward_s=flat(average_stage_forward_s(q.layer_s.forward, model.num_layers, keys.pp)),
        overlap_p2p_comm=training.runtime.overlap_p2p_comm,
        once_per_step_s=by_key(dp_comm + optimizer),
        memory_fixed=np.stack([by_key(f) for f in fixed]),
        memory_per_in_flight=np.stack([flat(f) for f in per_in_flight]),
        memory_step=None if step is None else np.stack([by_key(x) for x in step]),
        last_of_pipeline=np.stack([flat(t.last_of_pipeline) for t in q.stage_terms]),
        middle_of_pipeline=np.stack([flat(t.middle_of_pipeline) for t in q.stage_terms]),
    )


def grid_step_time_and_peak(tables: KeyTables, rows: Candidates, keys: IntArray) -> tuple[FloatArray, FloatArray]:
    """(step seconds, peak bytes), each (rows, pairs, ZeRO stages), of every row with every mode.

    `keys[r, j]` is row r's layer-level key under its j-th (recompute, sequence parallel) pair; the ZeRO
    stages are the tables' last axis (`KeyTables.at_zero_stages`). The step is `step.step_time_s` per
    (row, pair) without its once-per-step parts, which depend on the ZeRO stage and are added from the tables.
    """

    def at(table: np.ndarray) -> np.ndarray:  # `table[keys]`; np.take is several times faster for 2-D tables
        return np.take(table, keys, axis=0)

    column = (slice(None), None)
    pp, vp = rows.pp[column], rows.vp[column]
    sends = exposed_sends_s(pp, vp, at(tables.p2p_message_s), at(tables.stage_forward_s), tables.overlap_p2p_comm)
    pipelined = step_time_s(  # per (row, pair); the ZeRO-dependent once-per-step part is added below
        rows.num_microbatches[column].astype(np.float64),
        pp,
        vp,
        at(tables.critical_path_s),
        sends,
        at(tables.average_stage_s),
        0.0,
        at(tables.unpaired_s),
    )
    step = at(tables.once_per_step_s)
    step += pipelined[..., None]
    counts = stage_in_flight(rows)
    held = InFlight(counts.first[column], counts.middle[column], counts.last[column])
    peak = None
    for k in range(tables.memory_fixed.shape[0]):
        in_flight = stage_in_flight_microbatches(held, at(tables.last_of_pipeline[k]), at(tables.middle_of_pipeline[k]))
        stage = at(tables.memory_fixed[k])
        stage += (at(tables.memory_per_in_flight[k]) * in_flight)[..., None]
        if tables.memory_step is not None:
            np.maximum(stage, at(tables.memory_step[k]), out=stage)
        peak = stage if peak is None else np.maximum(peak, stage, out=peak)
    assert peak is not None
    return step, peak
