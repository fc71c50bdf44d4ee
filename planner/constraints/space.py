"""The candidate space: every layout the frameworks accept for a model, batch and GPU count.

Per-axis generators yield only legal degrees (divisors that the model's shape
allows); their product is filtered by the rules of `planner.rules` (the core set
unless another is given), each applied at the first level that binds its axes.
Each rule that removes something is counted under its name, so "why is there no
plan?" has an answer.

The space is kept as a product, not as one row per candidate: a *row* fixes
(tp, cp, pp, dp, ep, etp, vp, micro_batch_size, and whether the embedding and
the loss count in the pipeline split) and a *mode* fixes (recompute,
sequence_parallel, zero_stage); every row pairs with every mode, except that a
row with tp = 1 takes no mode with sequence parallelism. Rows that differ only
in vp (same stage split) share a *row key*, and a row key with a (recompute, sequence_parallel)
pair is a layer-level key of `costmodel.shared`. The search evaluates on this
grid and materialises `Candidates` columns only for the candidates it reports.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from planner.costmodel.candidates import RECOMPUTE_CODE, BoolArray, Candidates, IntArray, split_stage_layers
from planner.errors import InvalidSpecError
from planner.rules import (
    ACTIVATION_OFFLOAD,
    BATCH_DIVISIBLE,
    CONTEXT_SPLIT,
    CORE,
    CORE_RULES,
    EMBEDDING_IN_SPLIT,
    EXPERT_SPLIT,
    INTERLEAVE_MICROBATCHES,
    LAYOUT_AXES,
    LOSS_IN_SPLIT,
    MOE_A2A_OVERLAP,
    POSITIVE_SIZES,
    SEQUENCE_PARALLEL_NEEDS_TP,
    STAGE_SPLIT,
    TENSOR_SPLIT,
    WORLD_SIZE,
    Job,
    Rule,
    RuleSet,
)
from planner.specs import ModelSpec, Recompute, RecomputeModule, TrainingSpec

__all__ = [
    "AXES",
    "KEY_MODES",
    "MAX_CANDIDATES",
    "MAX_ROW_MODE_PAIRS",
    "MAX_MICRO_BATCH",
    "Space",
    "build_space",
    "divisors",
    "respace",
]

MAX_MICRO_BATCH = 16
"""Largest micro-batch searched: beyond it GEMMs are saturated and activations only grow."""
MAX_CANDIDATES = 3_000_000
"""Bound on one search's candidates, counted after every rule (`build_space`); a request past it is refused
before the cost model runs."""
MAX_ROW_MODE_PAIRS = 4 * MAX_CANDIDATES
"""Bound on (row, mode) pairs before the pair-level rules remove any: past it the request is refused before the
rows are built. The pair rules (sequence parallelism needs tp > 1, Megatron-FSDP needs pp 1, ...) remove up to
about half of a large MoE space (Qwen3-235B-A22B on 2,048 GPUs under Megatron-LM's rules: 2.3 million pairs,
1.1 million candidates), so the bound that counts is the one after them. 3 million keeps every preset on up to
4,096 GPUs searchable under Megatron-LM's, NeMo's and TorchTitan's rules (the largest, Qwen3-235B-A22B, reaches
2.3 / 2.3 / 2.5 million); under the core rules alone (framework "core", ZeRO 2/3 with pipelines allowed) the Qwen3
MoE spaces reach 3.1-4.5 million at 1,024-4,096 GPUs and are refused unless pinned."""
KEY_MODES = 6
"""(recompute, sequence_parallel) pairs a row key can have; a space's layer keys hold those its modes use
(`Space.key_pairs`): layer key = (position of recompute * 2 + sp among them) * row keys + row_key
(`Space.key_index`)."""

AXES = ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "micro_batch_size", "recompute", "sequence_parallel", "zero_stage")
AllowedValue = int | bool | str
Allowed = Mapping[str, Sequence[AllowedValue]]


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending (a new list: the callers may filter it)."""
    return list(_divisors(n))


@functools.lru_cache(maxsize=256)
def _divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


@dataclass(frozen=True, slots=True)
class Space:
    """Legal candidates for one GPU count, and how many partial layouts each rule removed.

    Candidate i is a (row, mode) pair: row r of `rows` (its recompute, sequence-parallel and ZeRO columns
    are placeholders) with mode j of `modes` (columns: recompute code, sequence_parallel, zero_stage), for
    the pairs `pairs` marks, ordered row-major; `row_starts[r]` is row r's first candidate (`locate` finds
    a candidate's pair). `layer_keys` holds the layer-level keys; flattened (`layer_candidates`), key
    `key_index(row_key[r], recompute * 2 + sp)` is row r's under that pair.
    """

    rows: Candidates
    modes: IntArray
    row_key: IntArray
    layer_keys: Candidates
    """The layer-level keys as a grid: the (recompute, sequence parallel) pairs the modes use down (`key_pairs`;
    columns (pairs, 1)), row keys across (columns (1, row keys)); the cost model broadcasts over it, so what
    depends on neither is computed once per row key. Row keys run along the last axis because numpy's
    inner loop runs there: a broadcast axis of 6 (or 4 ZeRO stages) last would make every operation a
    loop of 6-element strides, several times slower."""
    num_gpus: int
    pairs: BoolArray
    """(rows, modes): which pairs are candidates (sequence_parallel_needs_tp and any framework pair rule)."""
    row_starts: IntArray
    """(rows + 1): the index of each row's first candidate; the last entry is the candidate count."""
    rejected: Counter[str] = field(default_factory=Counter)
    key_pairs: IntArray = field(default_factory=lambda: np.arange(KEY_MODES))
    """The pair codes (recompute * 2 + sp, ascending) `layer_keys` holds, one per row of its grid: those the modes
    use, so a space pinned to one recompute mode (a module set's, or a request's constraint) prices a third of the
    keys."""
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    """The selective-recompute module set every candidate of this space runs (`Layout.recompute_modules`); None:
    the request's. The search builds one space per set it tries (`recompute.searched_module_sets`)."""

    def __len__(self) -> int:
        return int(self.row_starts[-1])

    def valid(self) -> BoolArray:
        """(rows, modes): which pairs are candidates, as `build_space` found them."""
        return self.pairs

    def locate(self, index: IntArray | BoolArray | slice) -> tuple[IntArray, IntArray]:
        """(row, mode) of the candidates selected by an index, mask or slice, in that order."""
        if isinstance(index, slice) or (index.dtype == np.bool_):
            index = np.arange(len(self))[index]
        if len(index) * 8 > len(self):  # most of the space: one pass over the pairs is cheaper
            row, mode = np.nonzero(self.pairs)
            return row[index], mode[index]
        row = np.searchsorted(self.row_starts, index, side="right") - 1
        offset = index - self.row_starts[row]
        # The offset-th valid mode of the row: the number of modes before which fewer than offset + 1 are valid.
        mode = np.count_nonzero(np.cumsum(self.pairs[row], axis=1) <= offset[:, None], axis=1)
        return row, mode

    def take(self, index: IntArray | BoolArray | slice) -> Candidates:
        """Columns of the candidates selected by an index, mask or slice."""
        row, mode_index = self.locate(index)
        mode = self.modes[mode_index]
        return replace(
            self.rows.take(row),
            recompute=mode[:, 0],
            sequence_parallel=mode[:, 1].astype(np.bool_),
            zero_stage=mode[:, 2],
        )

    @property
    def mode_grid(self) -> tuple[IntArray, IntArray]:
        """(pair codes recompute * 2 + sp, ZeRO stages): `modes` is their product, pair-major (`_modes`)."""
        zeros = np.unique(self.modes[:, 2])
        per_pair = self.modes[:: max(len(zeros), 1)]
        return per_pair[:, 0] * 2 + per_pair[:, 1], zeros

    @property
    def candidates(self) -> Candidates:
        """Every candidate's columns (materialised on each call; the search avoids it)."""
        return self.take(slice(None))

    @property
    def layer_candidates(self) -> Candidates:
        """`layer_keys` flattened, one candidate per layer-level key (materialised on each call)."""
        shape = self.layer_keys.shape
        return Candidates(
            **{f: np.broadcast_to(getattr(self.layer_keys, f), shape).reshape(-1) for f in Candidates.__slots__}
        )

    def key_index(self, row_key: IntArray, pair: IntArray) -> IntArray:
        """The layer-level key (a row of `layer_candidates`) of row key `row_key` under pair code `pair`
        (recompute * 2 + sp, one of `key_pairs`): pair-major, as `layer_keys` flattens. Broadcasts."""
        position = np.searchsorted(self.key_pairs, pair)
        return np.asarray(position * self.layer_keys.shape[1] + row_key, dtype=np.int64)

    @property
    def layer_index(self) -> IntArray:
        """Each candidate's row in `layer_candidates`."""
        row, mode_index = self.locate(slice(None))
        mode = self.modes[mode_index]
        return self.key_index(self.row_key[row], mode[:, 0] * 2 + mode[:, 1])


def _keep(values: Iterable[AllowedValue], key: str, allowed: Allowed, rejected: Counter[str]) -> list[AllowedValue]:
    kept = []
    for v in values:
        if key in allowed and v not in allowed[key]:
            rejected[f"constraint:{key}"] += 1
        else:
            kept.append(v)
    return kept


_BUILT_IN = (
    POSITIVE_SIZES,
    WORLD_SIZE,
    TENSOR_SPLIT,
    BATCH_DIVISIBLE,
    CONTEXT_SPLIT,
    EXPERT_SPLIT,
    STAGE_SPLIT,
    INTERLEAVE_MICROBATCHES,
    SEQUENCE_PARALLEL_NEEDS_TP,
    ACTIVATION_OFFLOAD,
    MOE_A2A_OVERLAP,
)
"""The core rules the space applies itself: in its generators (positive sizes, world size: only divisors of the
GPU count are degrees), in `_outer_degrees`, in `_rows` and in `build_space`'s pair rules."""
assert set(_BUILT_IN) <= set(CORE_RULES)


def _level_rules(rules: RuleSet) -> dict[str, tuple[Rule, ...]]:
    """The rule set's other rules (the core's hybrid-model rules, a framework's), each at the first level of the
    space that binds its axes, in the set's order (core rules first)."""
    out: dict[str, list[Rule]] = {level: [] for level in _LEVELS}
    for rule in rules.rules:
        if rule in _BUILT_IN:
            continue
        level = next(name for name, axes in _LEVELS.items() if set(rule.axes) <= axes)
        out[level].append(rule)
    return {level: tuple(found) for level, found in out.items()}


_LEVELS = {
    "tp": {"tp"},
    "cp": {"cp"},
    "outer": {"tp", "cp", "pp", "dp"},
    "row": {"tp", "cp", "pp", "dp", "ep", "etp", "micro_batch_size", "vp", EMBEDDING_IN_SPLIT, LOSS_IN_SPLIT},
    "pair": set(LAYOUT_AXES),
}
"""The space's levels, by the axes a rule may read there: tp, cp, (tp, cp, pp, dp), rows, (row, mode) pairs."""


def _first_failure(rules: tuple[Rule, ...], axis: str, values: IntArray, job: Job) -> dict[int, str | None]:
    """Per value of one axis: the name of the first of `rules` it breaks, or None."""
    out: dict[int, str | None] = {int(v): None for v in values}
    for rule in reversed(rules):
        for v in values[rule.broken({axis: values}, job)]:
            out[int(v)] = rule.name
    return out


def _outer_degrees(
    job: Job, rules: dict[str, tuple[Rule, ...]], allowed: Allowed, rejected: Counter[str]
) -> list[tuple[int, int, int, int]]:
    """(tp, cp, pp, dp) with tp*cp*pp*dp = n that pass the shape rules.

    Each rule is tested once over the GPU count's divisors, at the level that binds its axis:
    tensor_split per tp, context_split per cp, stage_split's pp <= num_layers per pp (vp = 1),
    batch_divisible's global_batch_size % dp per dp (micro-batch 1); a rejection counts per
    partial layout, after the request's constraint on that axis.
    """
    n = job.num_gpus
    degrees = np.asarray(divisors(n), dtype=np.int64)
    ones = np.ones_like(degrees)
    tensor = _first_failure((TENSOR_SPLIT, *rules["tp"]), "tp", degrees, job)
    context = _first_failure((CONTEXT_SPLIT, *rules["cp"]), "cp", degrees, job)
    plain = {"pp": degrees, "vp": ones, EMBEDDING_IN_SPLIT: 0 * ones, LOSS_IN_SPLIT: 0 * ones}
    stages = dict(zip(degrees.tolist(), STAGE_SPLIT.ok(plain, job).tolist(), strict=True))
    batch = BATCH_DIVISIBLE.ok({"dp": degrees, "micro_batch_size": ones}, job)
    whole_batch = dict(zip(degrees.tolist(), batch.tolist(), strict=True))
    out = []
    for tp in _keep(divisors(n), "tp", allowed, rejected):
        assert isinstance(tp, int)
        if (broken := tensor[tp]) is not None:
            rejected[broken] += 1
            continue
        for cp in _keep(divisors(n // tp), "cp", allowed, rejected):
            assert isinstance(cp, int)
            if (broken := context[cp]) is not None:
                rejected[broken] += 1
                continue
            for pp in _keep(divisors(n // (tp * cp)), "pp", allowed, rejected):
                assert isinstance(pp, int)
                dp = n // (tp * cp * pp)
                if not stages[pp]:
                    rejected[STAGE_SPLIT.name] += 1
                elif key_rejects(dp, "dp", allowed, rejected):
                    continue
                elif not whole_batch[dp]:
                    rejected[BATCH_DIVISIBLE.name] += 1
                else:
                    out.append((tp, cp, pp, dp))
    return _drop(out, rules["outer"], job, rejected)


def _drop(
    outer: list[tuple[int, int, int, int]], rules: tuple[Rule, ...], job: Job, rejected: Counter[str]
) -> list[tuple[int, int, int, int]]:
    """`outer` without the (tp, cp, pp, dp) that a framework rule at this level removes, counted."""
    if not rules or not outer:
        return outer
    columns = dict(zip(("tp", "cp", "pp", "dp"), np.asarray(outer, dtype=np.int64).T, strict=True))
    keep = _narrow(np.ones(len(outer), dtype=np.bool_), rules, columns, job, rejected)
    return [o for o, k in zip(outer, keep.tolist(), strict=True) if k]


def _narrow(
    legal: BoolArray,
    rules: tuple[Rule, ...],
    columns: Mapping[str, IntArray],
    job: Job,
    rejected: Counter[str],
    count_first: bool = False,
) -> BoolArray:
    """`legal` without what each rule breaks, in order, each removal counted under the rule's name.

    `count_first`: the first rule's count appears even when it is 0 (sequence_parallel_needs_tp always has).
    """
    for i, rule in enumerate(rules):
        broken = legal & rule.broken(columns, job)
        removed = int(np.count_nonzero(broken))
        if removed or (count_first and i == 0):
            rejected[rule.name] += removed
        legal = legal & ~broken
    return legal


def key_rejects(value: AllowedValue, key: str, allowed: Allowed, rejected: Counter[str]) -> bool:
    if key in allowed and value not in allowed[key]:
        rejected[f"constraint:{key}"] += 1
        return True
    return False


def _allowed_mask(values: IntArray, key: str, allowed: Allowed) -> BoolArray:
    if key not in allowed:
        return np.ones(np.shape(values), dtype=np.bool_)
    return np.isin(values, list(allowed[key]))


def _legal(
    rule_ok: BoolArray,
    axes: Mapping[str, IntArray],
    allowed: Allowed,
    rejected: Counter[str],
    rule: Rule,
    domain: BoolArray | None = None,
) -> BoolArray:
    """`rule_ok` (outer, value) narrowed to the request's constraints on `axes` (key -> its values, broadcasting
    against `rule_ok`), counting what it removes.

    A value the request pins that `rule` refuses is counted under the rule's name (it is what binds);
    a legal value the request leaves out is counted under the first constraint that leaves it out. Outside
    `domain` (default: everywhere) nothing is kept or counted.
    """
    masks = [np.broadcast_to(_allowed_mask(values, key, allowed), rule_ok.shape) for key, values in axes.items()]
    pinned = np.logical_and.reduce(masks) if masks else np.ones_like(rule_ok)
    if domain is not None:
        rule_ok, pinned = rule_ok & domain, pinned & domain
    if any(key in allowed for key in axes) and (refused := int(np.count_nonzero(pinned & ~rule_ok))):
        rejected[rule.name] += refused
    passed = rule_ok
    for key, mask in zip(axes, masks, strict=True):
        if removed := int(np.count_nonzero(passed & ~mask)):
            rejected[f"constraint:{key}"] += removed
        passed = passed & mask
    return np.asarray(rule_ok & pinned, dtype=np.bool_)


def vp_domain(num_layers: int, allowed: Allowed) -> IntArray:
    """(vp, embedding, loss) options worth testing, one row each, ascending.

    vp: the depths stage_split can accept (vp divides the pipeline layers per stage, so it divides
    num_layers, num_layers + 1 or num_layers + 2) and any the request pins (so that the rule refusing
    them is named). For vp > 1 also the three ways of counting the embedding and the loss as pipeline
    layers (Megatron-Core's account_for_embedding/loss_in_pipeline_split); `_rows` keeps those only where
    the plain split cannot interleave, so they add rows only where they change what divides.
    """
    pinned = {v for v in allowed.get("vp", ()) if isinstance(v, int) and not isinstance(v, bool) and v >= 1}
    depths = sorted(set(divisors(num_layers)) | set(divisors(num_layers + 1)) | set(divisors(num_layers + 2)) | pinned)
    options = [(v, e, lo) for v in depths for e, lo in ((0, 0), (0, 1), (1, 0), (1, 1)) if v > 1 or e + lo == 0]
    return np.asarray(options, dtype=np.int64).reshape(-1, 3)


def _expert_options(job: Job, allowed: Allowed) -> IntArray:
    """(ep, etp code) options worth testing, one row each; etp code 0 means "the same as tp", any other code
    is the etp itself.

    ep among the expert count's divisors (1 for a dense model). etp: tp (Megatron-Core's default) and, for a
    mixture-of-experts model, 1 (each expert whole on its rank, the experts folded over the attention's tp
    ranks: what NVIDIA's MoE recipes and TorchTitan run); any other etp the rules accept is searched where the
    request pins it (so is a dense model's, so that expert_split names what refuses it).
    """
    pinned = {v for v in allowed.get("etp", ()) if isinstance(v, int) and not isinstance(v, bool) and v >= 1}
    moe = job.model.moe
    codes = [0, 1, *sorted(pinned - {1})] if moe is not None else [0, *sorted(pinned)]
    experts = divisors(moe.num_experts) if moe is not None else [1]
    return np.asarray([(e, t) for e in experts for t in codes], dtype=np.int64).reshape(-1, 2)


def _rows(
    job: Job, outer: IntArray, extra: tuple[Rule, ...], allowed: Allowed, rejected: Counter[str]
) -> tuple[BoolArray, IntArray, IntArray, IntArray, IntArray]:
    """Which (outer, expert option, micro_batch_size, split) combinations are legal, and the (ep, etp code)
    options, the etp column (outer, option), the mbs and the split values.

    A split is a (vp, embedding, loss) row of `vp_domain`. The values searched are the rules' domains,
    not counted as rejections: (ep, etp) among `_expert_options` passing expert_split, micro-batches
    up to MAX_MICRO_BATCH passing batch_divisible, splits passing stage_split (vp up to the pipeline
    layers per stage), the embedding and loss counted only where the plain split (same pp and vp) breaks
    stage_split. interleave_microbatches (and a framework rule on these axes) is counted per combination
    of otherwise legal values.
    """
    tp, cp, pp, dp = (outer[:, j, None, None, None] for j in range(4))
    model = job.model
    options = _expert_options(job, allowed)
    mbs_values = np.arange(1, MAX_MICRO_BATCH + 1, dtype=np.int64)
    splits = vp_domain(model.num_layers, allowed)
    # Columns broadcast to (outer, expert option, mbs, split).
    ep, mbs = options[None, :, 0, None, None], mbs_values[None, None, :, None]
    code = options[None, :, 1, None, None]
    etp = np.where(code == 0, tp, code)
    vp, embedding, loss = (splits[None, None, None, :, j] for j in range(3))
    columns = {"tp": tp, "cp": cp, "pp": pp, "dp": dp, "ep": ep, "etp": etp, "micro_batch_size": mbs, "vp": vp}
    columns |= {EMBEDDING_IN_SPLIT: embedding, LOSS_IN_SPLIT: loss}
    plain = columns | {EMBEDDING_IN_SPLIT: 0 * embedding, LOSS_IN_SPLIT: 0 * loss}
    counted = (embedding + loss > 0)[:, 0, 0, :] & STAGE_SPLIT.broken(plain, job)[:, 0, 0, :]
    in_domain = (embedding + loss == 0)[:, 0, 0, :] | counted
    etp_column = etp[:, :, 0, 0]
    # An etp code whose etp is tp is the code-0 option already.
    distinct = (code[:, :, 0, 0] == 0) | (etp_column != tp[:, :, 0, 0])
    expert_axes = {"ep": ep[:, :, 0, 0], "etp": etp_column}
    ep_ok = _legal(EXPERT_SPLIT.ok(columns, job)[:, :, 0, 0], expert_axes, allowed, rejected, EXPERT_SPLIT, distinct)
    mbs_axes = {"micro_batch_size": mbs_values[None, :]}
    mbs_ok = _legal(BATCH_DIVISIBLE.ok(columns, job)[:, 0, :, 0], mbs_axes, allowed, rejected, BATCH_DIVISIBLE)
    stage_ok = STAGE_SPLIT.ok(columns, job)[:, 0, 0, :]
    vp_ok = _legal(stage_ok, {"vp": splits[None, :, 0]}, allowed, rejected, STAGE_SPLIT, in_domain)
    legal = mbs_ok[:, None, :, None] & vp_ok[:, None, None, :] & ep_ok[:, :, None, None]
    legal = _narrow(legal, (INTERLEAVE_MICROBATCHES, *extra), columns, job, rejected)
    return legal, options, np.broadcast_to(etp_column, ep_ok.shape), mbs_values, splits


def _modes(allowed: Allowed, rejected: Counter[str]) -> list[tuple[int, bool, int]]:
    """(recompute code, sequence_parallel, zero_stage) allowed by the request."""
    recompute = [r for r in Recompute if not key_rejects(r.value, "recompute", allowed, rejected)]
    sp = [s for s in (False, True) if not key_rejects(s, "sequence_parallel", allowed, rejected)]
    zero = [z for z in (0, 1, 2, 3) if not key_rejects(z, "zero_stage", allowed, rejected)]
    return [(RECOMPUTE_CODE[r], s, z) for r, s, z in itertools.product(recompute, sp, zero)]


def _too_many(count: str) -> InvalidSpecError:
    return InvalidSpecError(
        "cluster.num_gpus",
        f"more than {MAX_CANDIDATES} candidates ({count}) exceed the search bound; pin some dimensions",
    )


def build_space(
    model: ModelSpec, training: TrainingSpec, num_gpus: int, allowed: Allowed, rules: RuleSet = CORE
) -> Space:
    """Every candidate on `num_gpus` GPUs that `rules` (default: the core rules) and the request's constraints allow."""
    rejected: Counter[str] = Counter()
    job = Job(model, training, num_gpus)
    levels = _level_rules(rules)
    modes = np.asarray(_modes(allowed, rejected), dtype=np.int64).reshape(-1, 3)
    outer = np.asarray(_outer_degrees(job, levels, allowed, rejected), dtype=np.int64).reshape(-1, 4)
    legal, options, etp_values, mbs_values, splits = _rows(job, outer, levels["row"], allowed, rejected)
    pairs = int(np.count_nonzero(legal)) * len(modes)
    if pairs > MAX_ROW_MODE_PAIRS:  # refused before any row is built
        raise _too_many(f"{pairs} before the pair-level rules")
    # Row keys: (outer, expert option, mbs, stage split) with at least one legal vp; the stage split is which of the
    # embedding and the loss count in it (they move layers between stages, which the key-level stage terms read).
    split_kind = splits[:, 1] * 2 + splits[:, 2]
    has_row = np.stack([legal[..., split_kind == q].any(axis=3) for q in range(4)], axis=3)
    key_id = np.cumsum(has_row.ravel()).reshape(has_row.shape) - 1
    o, e, b, v = np.nonzero(legal)
    row_key = key_id[o, e, b, split_kind[v]]
    ko, ke, kb, kq = np.nonzero(has_row)
    rows = _columns(model, training, outer[o], options[e, 0], etp_values[o, e], splits[v], mbs_values[b])
    key_splits = np.stack([np.ones_like(kq), kq // 2, kq % 2], axis=1)
    keys = _columns(model, training, outer[ko], options[ke, 0], etp_values[ko, ke], key_splits, mbs_values[kb])
    key_row = Candidates(**{f: getattr(keys, f)[None, :] for f in Candidates.__slots__})
    return _with_modes(rows, row_key, key_row, modes, job, levels["pair"], rejected)


def respace(space: Space, model: ModelSpec, training: TrainingSpec, allowed: Allowed, rules: RuleSet = CORE) -> Space:
    """`build_space(model, training, space.num_gpus, allowed, rules)` for a request that differs from the one `space`
    was built for only in what the modes and the pair-level rules read (a recompute module set; a narrower
    recompute, sequence-parallel or ZeRO constraint): `space`'s rows, the modes and pairs built anew. No row-level
    rule reads the recompute mode or its modules (every rule naming the recompute axis is a pair rule)."""
    rejected: Counter[str] = Counter()
    modes = np.asarray(_modes(allowed, rejected), dtype=np.int64).reshape(-1, 3)
    job = Job(model, training, space.num_gpus)
    return _with_modes(space.rows, space.row_key, space.layer_keys, modes, job, _level_rules(rules)["pair"], rejected)


_PAIR_RULES = (SEQUENCE_PARALLEL_NEEDS_TP, ACTIVATION_OFFLOAD, MOE_A2A_OVERLAP)
"""The pair-level rules every space applies, before the rule set's own."""


def _with_modes(
    rows: Candidates,
    row_key: IntArray,
    key_row: Candidates,
    modes: IntArray,
    job: Job,
    pair_rules: Sequence[Rule],
    rejected: Counter[str],
) -> Space:
    """The space of `rows` times `modes`, the pairs the pair-level rules keep, and the layer-key grid over the
    (recompute, sequence parallel) pairs the modes use (`key_row`: the row keys' columns, (1, row keys))."""
    key_pairs = np.unique(modes[:, 0] * 2 + modes[:, 1]) if len(modes) else np.arange(KEY_MODES)
    key_modes = np.stack([key_pairs // 2, key_pairs % 2], axis=1)
    layer_keys = replace(
        key_row, recompute=key_modes[:, 0, None], sequence_parallel=key_modes[:, 1, None].astype(np.bool_)
    )
    valid = _pairs(rows, modes, job, (*_PAIR_RULES, *pair_rules), rejected)
    count = int(np.count_nonzero(valid))
    if count > MAX_CANDIDATES:  # refused before the cost model runs
        raise _too_many(str(count))
    return Space(
        rows=rows,
        modes=modes,
        row_key=row_key,
        layer_keys=layer_keys,
        num_gpus=job.num_gpus,
        rejected=rejected,
        pairs=valid,
        row_starts=np.concatenate([[0], np.cumsum(np.count_nonzero(valid, axis=1))]),
        key_pairs=key_pairs,
    )


def _pair_columns(rows: Candidates, modes: IntArray) -> dict[str, IntArray]:
    """(rows, modes) columns: row axes down, mode axes across."""
    sizes = ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "micro_batch_size")
    columns = {axis: getattr(rows, axis)[:, None] for axis in sizes}
    columns |= {"recompute": modes[None, :, 0], "sequence_parallel": modes[None, :, 1], "zero_stage": modes[None, :, 2]}
    columns |= {axis: getattr(rows, axis)[:, None] for axis in (EMBEDDING_IN_SPLIT, LOSS_IN_SPLIT)}
    return columns


def _pairs(rows: Candidates, modes: IntArray, job: Job, rules: tuple[Rule, ...], rejected: Counter[str]) -> BoolArray:
    """(rows, modes): which pairs pass the pair-level rules, counting what each removes."""
    everything = np.ones((len(rows), len(modes)), dtype=np.bool_)
    return _narrow(everything, rules, _pair_columns(rows, modes), job, rejected, count_first=True)


def _columns(
    model: ModelSpec,
    training: TrainingSpec,
    outer: IntArray,
    ep: IntArray,
    etp: IntArray,
    split: IntArray,
    mbs: IntArray,
) -> Candidates:
    """Candidates with (tp, cp, pp, dp) from `outer`, (vp, embedding, loss) from `split`; recompute none,
    no sequence parallel, ZeRO 0."""
    tp, cp, pp, dp = outer.T
    vp, embedding, loss = split.T
    first, middle, last = split_stage_layers(model.num_layers, pp, embedding, loss)
    zeros = np.zeros(len(tp), dtype=np.int64)
    return Candidates(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        ep=ep,
        etp=etp,
        vp=vp,
        micro_batch_size=mbs,
        num_microbatches=np.maximum(training.global_batch_size // (mbs * dp), 1),
        recompute=zeros,
        sequence_parallel=zeros.astype(np.bool_),
        zero_stage=zeros,
        stage_layers=np.maximum(np.maximum(first, middle), last),
        first_stage_layers=first,
        last_stage_layers=last,
        account_for_embedding_in_pipeline_split=embedding.astype(np.bool_),
        account_for_loss_in_pipeline_split=loss.astype(np.bool_),
    )
