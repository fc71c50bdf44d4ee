"""The candidate space: every layout the frameworks accept for a model, batch and GPU count.

Per-axis generators yield only legal degrees (divisors that the model's shape
allows); their product is filtered by named rules. Each rule that removes
something is counted under its name, so "why is there no plan?" has an answer.
The result is a `Candidates` column store for the vectorised cost model.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.costmodel.candidates import RECOMPUTE_CODE, Candidates, IntArray, default_stage_layers
from planner.errors import InvalidSpecError
from planner.specs import ModelSpec, Recompute, TrainingSpec

__all__ = ["AXES", "MAX_CANDIDATES", "MAX_MICRO_BATCH", "MAX_VP", "Space", "build_space", "divisors"]

MAX_MICRO_BATCH = 16
"""Largest micro-batch searched: beyond it GEMMs are saturated and activations only grow."""
MAX_VP = 8
"""Largest interleaving depth searched."""
MAX_CANDIDATES = 2_000_000
"""Bound on one search's candidates; a request past it is refused before any work."""

AXES = ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch_size", "recompute", "sequence_parallel", "zero_stage")
AllowedValue = int | bool | str
Allowed = Mapping[str, Sequence[AllowedValue]]


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True, slots=True)
class Space:
    """Legal candidates for one GPU count, and how many partial layouts each rule removed.

    `layer_candidates` holds one candidate per distinct layer-level key (see
    `costmodel.shared`); `layer_index[i]` is the row of candidate i's key there.
    """

    candidates: Candidates
    num_gpus: int
    layer_candidates: Candidates
    layer_index: IntArray
    rejected: Counter[str] = field(default_factory=Counter)


def _keep(values: Iterable[AllowedValue], key: str, allowed: Allowed, rejected: Counter[str]) -> list[AllowedValue]:
    kept = []
    for v in values:
        if key in allowed and v not in allowed[key]:
            rejected[f"constraint:{key}"] += 1
        else:
            kept.append(v)
    return kept


def _tensor_degrees(model: ModelSpec, n: int, allowed: Allowed, rejected: Counter[str]) -> list[int]:
    out = []
    for tp in _keep(divisors(n), "tp", allowed, rejected):
        assert isinstance(tp, int)
        g = model.num_query_groups
        widths = [model.ffn_hidden_size] + ([model.moe.expert_ffn_hidden_size] if model.moe else [])
        if model.num_attention_heads % tp or (g % tp and tp % g) or any(w % tp for w in widths):
            rejected["tensor_split"] += 1
            continue
        out.append(tp)
    return out


def _outer_degrees(
    model: ModelSpec, train: TrainingSpec, n: int, allowed: Allowed, rejected: Counter[str]
) -> list[tuple[int, int, int, int]]:
    """(tp, cp, pp, dp) with tp*cp*pp*dp = n that pass the shape rules."""
    out = []
    for tp in _tensor_degrees(model, n, allowed, rejected):
        for cp in _keep(divisors(n // tp), "cp", allowed, rejected):
            assert isinstance(cp, int)
            if cp > 1 and model.seq_length % (2 * cp):
                rejected["context_split"] += 1
                continue
            for pp in _keep(divisors(n // (tp * cp)), "pp", allowed, rejected):
                assert isinstance(pp, int)
                dp = n // (tp * cp * pp)
                if pp > model.num_layers:
                    rejected["stage_split"] += 1
                elif key_rejects(dp, "dp", allowed, rejected):
                    continue
                elif train.global_batch_size % dp:
                    rejected["batch_divisible"] += 1
                else:
                    out.append((tp, cp, pp, dp))
    return out


def key_rejects(value: AllowedValue, key: str, allowed: Allowed, rejected: Counter[str]) -> bool:
    if key in allowed and value not in allowed[key]:
        rejected[f"constraint:{key}"] += 1
        return True
    return False


def _inner_options(
    model: ModelSpec, train: TrainingSpec, outer: tuple[int, int, int, int], allowed: Allowed, rejected: Counter[str]
) -> list[tuple[int, int, int]]:
    """(ep, vp, micro_batch_size) legal for one (tp, cp, pp, dp)."""
    tp, cp, pp, dp = outer
    experts = model.moe.num_experts if model.moe else 1
    eps = [e for e in divisors(dp * cp) if experts % e == 0] if model.moe else [1]
    eps = [e for e in eps if not key_rejects(e, "ep", allowed, rejected)]
    vps = [1] + [v for v in range(2, MAX_VP + 1) if pp > 1 and model.num_layers % (pp * v) == 0]
    vps = [v for v in vps if not key_rejects(v, "vp", allowed, rejected)]
    per_replica = train.global_batch_size // dp
    mbs = [b for b in divisors(per_replica) if b <= MAX_MICRO_BATCH]
    mbs = [b for b in mbs if not key_rejects(b, "micro_batch_size", allowed, rejected)]
    options = []
    for ep, vp, b in itertools.product(eps, vps, mbs):
        if vp > 1 and (per_replica // b) % pp:
            rejected["interleave_microbatches"] += 1
        else:
            options.append((ep, vp, b))
    return options


def _modes(allowed: Allowed, rejected: Counter[str]) -> list[tuple[int, bool, int]]:
    """(recompute code, sequence_parallel, zero_stage) allowed by the request."""
    recompute = [r for r in Recompute if not key_rejects(r.value, "recompute", allowed, rejected)]
    sp = [s for s in (False, True) if not key_rejects(s, "sequence_parallel", allowed, rejected)]
    zero = [z for z in (0, 1, 2, 3) if not key_rejects(z, "zero_stage", allowed, rejected)]
    return [(RECOMPUTE_CODE[r], s, z) for r, s, z in itertools.product(recompute, sp, zero)]


def build_space(model: ModelSpec, train: TrainingSpec, num_gpus: int, allowed: Allowed) -> Space:
    """Every legal candidate on `num_gpus` GPUs under the request's constraints."""
    rejected: Counter[str] = Counter()
    modes = np.asarray(_modes(allowed, rejected), dtype=np.int64).reshape(-1, 3)
    rows: list[tuple[int, ...]] = []
    for outer in _outer_degrees(model, train, num_gpus, allowed, rejected):
        rows.extend(outer + inner for inner in _inner_options(model, train, outer, allowed, rejected))
        if len(rows) * len(modes) > MAX_CANDIDATES:  # refused as soon as it is known, before the space is built
            raise InvalidSpecError(
                "cluster.num_gpus",
                f"more than {MAX_CANDIDATES} candidates ({len(rows) * len(modes)} so far) exceed the search bound;"
                " pin some dimensions",
            )
    base = np.asarray(rows, dtype=np.int64).reshape(-1, 7)
    layer_ids: dict[tuple[int, ...], int] = {}
    layer_of_row = np.asarray([layer_ids.setdefault(row[:5] + row[6:], len(layer_ids)) for row in rows], np.int64)
    layer_rows = np.asarray(list(layer_ids), dtype=np.int64).reshape(-1, 6)
    layer_modes = np.asarray([(r, s, 0) for r in range(3) for s in (0, 1)], dtype=np.int64)
    layer_grid = np.insert(layer_rows, 5, 1, axis=1)
    layer_candidates = _columns(model, train, layer_grid, layer_modes, *_product(len(layer_grid), len(layer_modes)))
    # Sequence parallelism needs tp > 1: rows with tp = 1 get only the modes without it.
    single = base[:, 0] == 1
    sp_rows, plain_rows = np.flatnonzero(~single), np.flatnonzero(single)
    plain_modes = np.flatnonzero(modes[:, 1] == 0)
    rejected["sequence_parallel_needs_tp"] += len(plain_rows) * (len(modes) - len(plain_modes))
    row_a, mode_a = _product(len(sp_rows), len(modes))
    row_b, mode_b = _product(len(plain_rows), len(plain_modes))
    row = np.concatenate([sp_rows[row_a], plain_rows[row_b]])
    mode = np.concatenate([mode_a, plain_modes[mode_b]])
    layer_index = layer_of_row[row] * len(layer_modes) + modes[mode, 0] * 2 + modes[mode, 1]
    return Space(
        candidates=_columns(model, train, base, modes, row, mode),
        num_gpus=num_gpus,
        layer_candidates=layer_candidates,
        layer_index=layer_index,
        rejected=rejected,
    )


def _product(rows: int, modes: int) -> tuple[IntArray, IntArray]:
    """Row and mode indices of the product, rows outer."""
    return np.repeat(np.arange(rows), modes), np.tile(np.arange(modes), rows)


def _columns(
    model: ModelSpec, train: TrainingSpec, rows: np.ndarray, modes: np.ndarray, row: IntArray, mode: IntArray
) -> Candidates:
    """Candidates pairing (tp, cp, pp, dp, ep, vp, micro_batch_size) rows with (recompute, sp, zero) modes."""
    tp, cp, pp, dp, ep, vp, mbs = rows.T
    first, middle, last = default_stage_layers(model.num_layers, pp)
    per_row = {
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "cp": cp,
        "ep": ep,
        "vp": vp,
        "micro_batch_size": mbs,
        "num_microbatches": np.maximum(train.global_batch_size // (mbs * dp), 1),
        "stage_layers": np.maximum(np.maximum(first, middle), last),
        "first_stage_layers": first,
        "last_stage_layers": last,
    }
    columns = {name: values[row] for name, values in per_row.items()}
    columns["recompute"] = modes[mode, 0]
    columns["sequence_parallel"] = modes[mode, 1].astype(bool)
    columns["zero_stage"] = modes[mode, 2]
    return Candidates(**columns)
