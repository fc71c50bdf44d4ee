"""The candidate space: every layout the frameworks accept for a model, batch and GPU count.

Per-axis generators yield only legal degrees (divisors that the model's shape
allows); their product is filtered by named rules. Each rule that removes
something is counted under its name, so "why is there no plan?" has an answer.

The space is kept as a product, not as one row per candidate: a *row* fixes
(tp, cp, pp, dp, ep, vp, micro_batch_size) and a *mode* fixes (recompute,
sequence_parallel, zero_stage); every row pairs with every mode, except that a
row with tp = 1 takes no mode with sequence parallelism. Rows that differ only
in vp share a *row key*, and a row key with a (recompute, sequence_parallel)
pair is a layer-level key of `costmodel.shared`. The search evaluates on this
grid and materialises `Candidates` columns only for the candidates it reports.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from planner.costmodel.candidates import RECOMPUTE_CODE, BoolArray, Candidates, IntArray, default_stage_layers
from planner.errors import InvalidSpecError
from planner.specs import ModelSpec, Recompute, TrainingSpec

__all__ = [
    "AXES",
    "KEY_MODES",
    "MAX_CANDIDATES",
    "MAX_MICRO_BATCH",
    "MAX_VP",
    "Space",
    "build_space",
    "divisors",
]

MAX_MICRO_BATCH = 16
"""Largest micro-batch searched: beyond it GEMMs are saturated and activations only grow."""
MAX_VP = 8
"""Largest interleaving depth searched."""
MAX_CANDIDATES = 2_000_000
"""Bound on one search's candidates; a request past it is refused before any work."""
KEY_MODES = 6
"""(recompute, sequence_parallel) pairs per row key: layer key = row_key * KEY_MODES + recompute * 2 + sp."""

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

    Candidate i is row `row[i]` of `rows` (its recompute, sequence-parallel
    and ZeRO columns are placeholders) with mode `mode[i]` of `modes`
    (columns: recompute code, sequence_parallel, zero_stage); candidates are
    ordered row-major. `layer_candidates` holds one candidate per layer-level
    key, at row `row_key[r] * KEY_MODES + recompute * 2 + sp`.
    """

    rows: Candidates
    modes: IntArray
    row: IntArray
    mode: IntArray
    row_key: IntArray
    layer_candidates: Candidates
    num_gpus: int
    rejected: Counter[str] = field(default_factory=Counter)

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def valid(self) -> BoolArray:
        """(rows, modes): which pairs are candidates (sequence parallelism needs tp > 1)."""
        return _pairs(self.rows, self.modes)

    def take(self, index: IntArray | BoolArray | slice) -> Candidates:
        """Columns of the candidates selected by an index, mask or slice."""
        mode = self.modes[self.mode[index]]
        return replace(
            self.rows.take(self.row[index]),
            recompute=mode[:, 0],
            sequence_parallel=mode[:, 1].astype(np.bool_),
            zero_stage=mode[:, 2],
        )

    @property
    def candidates(self) -> Candidates:
        """Every candidate's columns (materialised on each call; the search avoids it)."""
        return self.take(slice(None))

    @property
    def layer_index(self) -> IntArray:
        """Each candidate's row in `layer_candidates`."""
        mode = self.modes[self.mode]
        return self.row_key[self.row] * KEY_MODES + mode[:, 0] * 2 + mode[:, 1]


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


def _allowed_mask(values: IntArray, key: str, allowed: Allowed) -> BoolArray:
    if key not in allowed:
        return np.ones(len(values), dtype=np.bool_)
    return np.isin(values, list(allowed[key]))


def _legal(legal: BoolArray, values: IntArray, key: str, allowed: Allowed, rejected: Counter[str]) -> BoolArray:
    """`legal` (outer, value) narrowed to the request's constraint on `key`, counting what it removes."""
    kept = legal & _allowed_mask(values, key, allowed)[None, :]
    if removed := int(np.count_nonzero(legal & ~kept)):
        rejected[f"constraint:{key}"] += removed
    return kept


def _rows(
    model: ModelSpec, train: TrainingSpec, outer: IntArray, allowed: Allowed, rejected: Counter[str]
) -> tuple[BoolArray, IntArray, IntArray, IntArray]:
    """Which (outer, ep, micro_batch_size, vp) combinations are legal, and the ep, mbs and vp values.

    Per (tp, cp, pp, dp): ep divides dp*cp and the expert count; the micro-batch
    divides the per-replica batch (up to MAX_MICRO_BATCH); vp > 1 needs pp > 1,
    a layer count that splits into pp*vp chunks and a micro-batch count that is
    a multiple of pp (Megatron's interleaved schedule).
    """
    _, cp, pp, dp = (outer[:, j, None] for j in range(4))
    ep_values = np.asarray(divisors(model.moe.num_experts) if model.moe else [1], dtype=np.int64)
    mbs_values = np.arange(1, MAX_MICRO_BATCH + 1, dtype=np.int64)
    vp_values = np.arange(1, MAX_VP + 1, dtype=np.int64)
    ep_ok = _legal((dp * cp) % ep_values == 0, ep_values, "ep", allowed, rejected)
    per_replica = train.global_batch_size // dp
    mbs_ok = _legal(per_replica % mbs_values == 0, mbs_values, "micro_batch_size", allowed, rejected)
    splits = (vp_values == 1) | ((pp > 1) & (model.num_layers % (pp * vp_values) == 0))
    vp_ok = _legal(splits, vp_values, "vp", allowed, rejected)
    # (outer, mbs, vp): interleaving needs the micro-batch count to be a multiple of pp.
    uneven = (vp_values[None, None, :] > 1) & (((per_replica // mbs_values)[:, :, None] % pp[:, :, None]) != 0)
    shape_ok = mbs_ok[:, None, :, None] & vp_ok[:, None, None, :] & ep_ok[:, :, None, None]
    if removed := int(np.count_nonzero(shape_ok & uneven[:, None])):
        rejected["interleave_microbatches"] += removed
    return shape_ok & ~uneven[:, None], ep_values, mbs_values, vp_values


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
    outer = np.asarray(_outer_degrees(model, train, num_gpus, allowed, rejected), dtype=np.int64).reshape(-1, 4)
    legal, ep_values, mbs_values, vp_values = _rows(model, train, outer, allowed, rejected)
    count = int(np.count_nonzero(legal)) * len(modes)
    if count > MAX_CANDIDATES:  # refused before any candidate is built
        raise InvalidSpecError(
            "cluster.num_gpus",
            f"more than {MAX_CANDIDATES} candidates ({count} before the sequence-parallel rule) exceed the search"
            " bound; pin some dimensions",
        )
    # Row keys: (outer, ep, mbs) with at least one legal vp; rows: each key's legal vps, key-major.
    has_row = legal.any(axis=3)
    key_id = np.cumsum(has_row.ravel()).reshape(has_row.shape) - 1
    o, e, b, v = np.nonzero(legal)
    row_key = key_id[o, e, b]
    ko, ke, kb = np.nonzero(has_row)
    rows = _columns(model, train, outer[o], ep_values[e], vp_values[v], mbs_values[b])
    keys = _columns(model, train, outer[ko], ep_values[ke], np.ones(len(ko), np.int64), mbs_values[kb])
    key_modes = np.asarray([(r, s) for r in range(3) for s in (0, 1)], dtype=np.int64)
    layer_candidates = replace(
        keys.take(np.repeat(np.arange(len(keys)), KEY_MODES)),
        recompute=np.tile(key_modes[:, 0], len(keys)),
        sequence_parallel=np.tile(key_modes[:, 1], len(keys)).astype(np.bool_),
    )
    valid = _pairs(rows, modes)
    rejected["sequence_parallel_needs_tp"] += int(np.count_nonzero(~valid))
    row, mode = np.nonzero(valid)
    return Space(
        rows=rows,
        modes=modes,
        row=row,
        mode=mode,
        row_key=row_key,
        layer_candidates=layer_candidates,
        num_gpus=num_gpus,
        rejected=rejected,
    )


def _pairs(rows: Candidates, modes: IntArray) -> BoolArray:
    """(rows, modes): which pairs are candidates; sequence parallelism needs tp > 1."""
    valid: BoolArray = ~((rows.tp == 1)[:, None] & (modes[:, 1] == 1)[None, :])
    return valid


def _columns(
    model: ModelSpec, train: TrainingSpec, outer: IntArray, ep: IntArray, vp: IntArray, mbs: IntArray
) -> Candidates:
    """Candidates with (tp, cp, pp, dp) from `outer`; recompute none, no sequence parallel, ZeRO 0."""
    tp, cp, pp, dp = outer.T
    first, middle, last = default_stage_layers(model.num_layers, pp)
    zeros = np.zeros(len(tp), dtype=np.int64)
    return Candidates(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        ep=ep,
        vp=vp,
        micro_batch_size=mbs,
        num_microbatches=np.maximum(train.global_batch_size // (mbs * dp), 1),
        recompute=zeros,
        sequence_parallel=zeros.astype(np.bool_),
        zero_stage=zeros,
        stage_layers=np.maximum(np.maximum(first, middle), last),
        first_stage_layers=first,
        last_stage_layers=last,
    )
