"""ZeRO sharding: over how many ranks each parameter's states are split, and from which ZeRO stage.

Sources: Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054) Sec. 5.1-5.3:
stage 1 partitions the optimizer states (P_os), stage 2 also the gradients
(P_os+g), stage 3 also the parameters (P_os+g+p), each over the data-parallel
group. Megatron-LM's distributed optimizer is stage 1 over dp x cp; experts are
sharded over their own expert-data-parallel group, tp x cp x dp / (etp x ep)
ranks holding the same experts (Megatron-Core `expert_data_parallel` groups).
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from planner.costmodel.candidates import Candidates, FloatArray, IntArray
from planner.costmodel.params import ParamCounts

__all__ = ["ModelState", "held_params", "shard_group_sizes", "sharded_params"]


class ModelState(IntEnum):
    """A model state, valued at the first ZeRO stage that shards it (Rajbhandari 2020 Sec. 5.1-5.3)."""

    OPTIMIZER = 1
    GRADIENTS = 2
    PARAMETERS = 3


def shard_group_sizes(
    dp: IntArray, cp: IntArray, tp: IntArray, ep: IntArray, etp: IntArray
) -> tuple[IntArray, IntArray]:
    """(dense, expert) ranks a sharded state is split over: dp x cp, and the expert-dp group
    max(tp x cp x dp // (etp x ep), 1) (Megatron-Core `initialize_model_parallel`: expert_data_parallel_size
    = world / (etp x ep x pp); dp x cp / ep when etp = tp).

    The expert group is a whole number of ranks; for a layout that breaks expert_split's divisibility it is
    rounded down, as the group the expert gradients are reduced over is.
    """
    dense = dp * cp
    return dense, np.maximum(tp * dense // (etp * ep), 1)


def sharded_params(params: ParamCounts, c: Candidates) -> FloatArray:
    """Parameters of one shard: dense / (dp x cp) + expert / expert-dp (`shard_group_sizes`); broadcasts."""
    dense_group, expert_group = shard_group_sizes(c.dp, c.cp, c.tp, c.ep, c.etp)
    return np.asarray(params.dense / dense_group + params.expert / expert_group, dtype=np.float64)


def held_params(zero_stage: IntArray, state: ModelState, total: FloatArray, sharded: FloatArray) -> FloatArray:
    """Parameters whose `state` one GPU holds: the shard (`sharded_params`) where ZeRO shards `state`, else
    all of them (`total`, i.e. `ParamCounts.total`).

    ZeRO stage z shards `state` when z >= state; broadcasts over all arguments.
    """
    held: FloatArray = np.where(zero_stage >= state, sharded, total)
    return held
