"""Layouts as columns of numpy arrays, so the cost model evaluates thousands at once.

Every cost function takes a `Candidates` and returns one value per candidate;
a single layout is a batch of one. The recompute mode is stored as a code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from planner.layout import Layout
from planner.specs import ModelSpec, Recompute

__all__ = [
    "FULL",
    "NONE",
    "RECOMPUTE_CODE",
    "RECOMPUTE_CODES",
    "SELECTIVE",
    "BoolArray",
    "Candidates",
    "FloatArray",
    "IntArray",
    "default_stage_layers",
    "split_stage_layers",
    "select_max",
    "stages_of",
    "tokens_per_microbatch",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NONE, SELECTIVE, FULL = 0, 1, 2
"""Recompute codes as `Candidates.recompute` stores them (`Recompute.NONE`, `.SELECTIVE`, `.FULL`)."""
RECOMPUTE_CODE: dict[Recompute, int] = {Recompute.NONE: NONE, Recompute.SELECTIVE: SELECTIVE, Recompute.FULL: FULL}
RECOMPUTE_CODES = (NONE, SELECTIVE, FULL)
"""Every code in ascending order: a table over modes built in this order is indexed by `Candidates.recompute`."""
_RECOMPUTE_BY_CODE = {code: mode for mode, code in RECOMPUTE_CODE.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidates:
    """Column store of layouts.

    `stage_layers` is the largest layer count of any pipeline stage;
    `first_stage_layers` and `last_stage_layers` those of the stages that also
    hold the embedding and the output layer (the same stage when pp = 1).
    """

    tp: IntArray
    pp: IntArray
    dp: IntArray
    cp: IntArray
    ep: IntArray
    etp: IntArray
    """Expert tensor-parallel size (`Layout.etp`, resolved: never 0)."""
    vp: IntArray
    micro_batch_size: IntArray
    num_microbatches: IntArray
    recompute: IntArray
    sequence_parallel: BoolArray
    zero_stage: IntArray
    stage_layers: IntArray
    first_stage_layers: IntArray
    last_stage_layers: IntArray
    account_for_embedding_in_pipeline_split: BoolArray
    """The layout's account_for_embedding_in_pipeline_split (the stage counts above already follow it)."""
    account_for_loss_in_pipeline_split: BoolArray
    """The layout's account_for_loss_in_pipeline_split."""

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape the columns broadcast to (a search may hold some axes as broadcast dimensions)."""
        return np.broadcast_shapes(*(np.shape(getattr(self, name)) for name in self.__slots__))

    @classmethod
    def from_layouts(cls, layouts: Sequence[Layout], num_layers: int, global_batch_size: int) -> Candidates:
        def col(values: list[int]) -> IntArray:
            return np.asarray(values, dtype=np.int64)

        def flag(values: list[bool]) -> BoolArray:
            return np.asarray(values, dtype=np.bool_)

        stages = [stages_of(x, num_layers) for x in layouts]
        return cls(
            tp=col([x.tp for x in layouts]),
            pp=col([x.pp for x in layouts]),
            dp=col([x.dp for x in layouts]),
            cp=col([x.cp for x in layouts]),
            ep=col([x.ep for x in layouts]),
            etp=col([x.etp for x in layouts]),
            vp=col([x.vp for x in layouts]),
            micro_batch_size=col([x.micro_batch_size for x in layouts]),
            num_microbatches=col([max(1, x.num_microbatches(global_batch_size)) for x in layouts]),
            recompute=col([RECOMPUTE_CODE[x.recompute] for x in layouts]),
            sequence_parallel=np.asarray([x.sequence_parallel for x in layouts], dtype=np.bool_),
            zero_stage=col([x.zero_stage for x in layouts]),
            stage_layers=col([max(split) for split in stages]),
            first_stage_layers=col([split[0] for split in stages]),
            last_stage_layers=col([split[-1] for split in stages]),
            account_for_embedding_in_pipeline_split=flag([x.account_for_embedding_in_pipeline_split for x in layouts]),
            account_for_loss_in_pipeline_split=flag([x.account_for_loss_in_pipeline_split for x in layouts]),
        )

    def layout(self, i: int, num_layers: int) -> Layout:
        """The i-th candidate as a `Layout`, with its stage split written out."""
        layout = Layout(
            tp=int(self.tp[i]),
            pp=int(self.pp[i]),
            dp=int(self.dp[i]),
            cp=int(self.cp[i]),
            ep=int(self.ep[i]),
            etp=int(self.etp[i]),
            vp=int(self.vp[i]),
            micro_batch_size=int(self.micro_batch_size[i]),
            recompute=_RECOMPUTE_BY_CODE[int(self.recompute[i])],
            sequence_parallel=bool(self.sequence_parallel[i]),
            zero_stage=int(self.zero_stage[i]),
            account_for_embedding_in_pipeline_split=bool(self.account_for_embedding_in_pipeline_split[i]),
            account_for_loss_in_pipeline_split=bool(self.account_for_loss_in_pipeline_split[i]),
        )
        return replace(layout, layers_per_stage=stages_of(layout, num_layers))

    def take(self, index: IntArray | BoolArray | slice) -> Candidates:
        """The candidates selected by an index, mask or slice."""
        return Candidates(**{name: getattr(self, name)[index] for name in self.__slots__})


def tokens_per_microbatch(model: ModelSpec, c: Candidates) -> FloatArray:
    """Tokens of one micro-batch that one GPU processes: b s / cp (context parallelism splits the sequence).

    Tensor parallelism does not split them (sequence parallelism splits only the
    replicated region; the callers divide by tp where it applies).
    """
    return np.asarray(c.micro_batch_size * model.seq_length / c.cp, dtype=np.float64)


def select_max(keys: Sequence[FloatArray], *options: Sequence[npt.NDArray[np.generic]]) -> list[np.ndarray]:
    """Per candidate, from each option list the entry whose key is largest (first on ties), like argmax."""
    best = keys[0]
    chosen = [opt[0] for opt in options]
    for i in range(1, len(keys)):
        better = keys[i] > best
        best = np.where(better, keys[i], best)
        chosen = [np.where(better, opt[i], cur) for opt, cur in zip(options, chosen, strict=True)]
    return chosen


def default_stage_layers(num_layers: int, pp: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """(first, middle, last) layer counts of the default split of `num_layers` over `pp` stages.

    Megatron-LM splits evenly, or with `--decoder-first-pipeline-num-layers` and
    `--decoder-last-pipeline-num-layers` gives the first and last stage their own
    counts and the middle stages an equal share: middle = ceil(L / pp) and the
    rest split between first and last (first gets the odd layer). One stage: all.
    """
    pp = np.asarray(pp, dtype=np.int64)
    middle = -(-num_layers // np.maximum(pp, 1))
    rest = num_layers - middle * np.maximum(pp - 2, 0)
    middle = np.where((pp > 2) & (rest < 2), num_layers // np.maximum(pp, 1), middle)
    rest = num_layers - middle * np.maximum(pp - 2, 0)
    first = np.where(pp == 1, num_layers, -(-rest // 2))
    last = np.where(pp == 1, num_layers, rest // 2)
    return first, np.where(pp > 2, middle, 0), last


def split_stage_layers(
    num_layers: int, pp: IntArray, embedding: IntArray | BoolArray, loss: IntArray | BoolArray
) -> tuple[IntArray, IntArray, IntArray]:
    """(first, middle, last) transformer-layer counts: the default split, or Megatron-Core's even split of
    num_layers + embedding + loss pipeline layers where either counts (the first stage gives one layer to
    the embedding, the last one to the output layer and loss).

    Source: megatron-core 0.16 megatron/core/transformer/transformer_block.py get_num_layers_to_build
    (account_for_embedding/loss_in_pipeline_split: (num_layers + 1 + 1) // pp per rank, the first and last
    rank building one transformer layer fewer). One stage: all layers.
    """
    pp = np.asarray(pp, dtype=np.int64)
    e, lo = np.asarray(embedding, dtype=np.int64), np.asarray(loss, dtype=np.int64)
    first, middle, last = default_stage_layers(num_layers, pp)
    per_rank = (num_layers + e + lo) // np.maximum(pp, 1)
    counted = ((e + lo) > 0) & (pp > 1)
    return (
        np.where(counted, per_rank - e, first),
        np.where(counted & (pp > 2), per_rank, middle),
        np.where(counted, per_rank - lo, last),
    )


def stages_of(layout: Layout, num_layers: int) -> tuple[int, ...]:
    """Layers per stage (length pp): as the layout gives them, else the default split (embedding/loss counted)."""
    if layout.layers_per_stage:
        return layout.layers_per_stage
    split = split_stage_layers(
        num_layers,
        np.asarray([layout.pp]),
        np.asarray([layout.account_for_embedding_in_pipeline_split]),
        np.asarray([layout.account_for_loss_in_pipeline_split]),
    )
    first, middle, last = (int(x[0]) for x in split)
    if layout.pp == 1:
        return (first,)
    return (first,) + (middle,) * (layout.pp - 2) + (last,)
