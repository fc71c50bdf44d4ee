"""The candidate layout: how one training job is split over the GPUs."""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs import Recompute

__all__ = ["Layout"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One parallel layout. `tp * pp * dp * cp` is the GPU count. The experts have their own grid over each
    stage's `tp * cp * dp` ranks (Megatron-Core's MoE parallel folding): `etp` expert-tensor ranks, `ep`
    expert-parallel ranks and the rest expert-data-parallel."""

    tp: int
    pp: int
    dp: int
    cp: int = 1
    ep: int = 1
    etp: int = 0
    """Expert tensor-parallel size: over how many ranks each routed expert's weights are split. 0 (default):
    the same as tp, Megatron-Core's default (`expert_tensor_parallel_size` None -> tp); resolved on creation."""
    vp: int = 1
    micro_batch_size: int = 1
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False
    zero_stage: int = 0
    layers_per_stage: tuple[int, ...] | None = None
    account_for_embedding_in_pipeline_split: bool = False
    """Megatron-Core counts the input embedding as one layer of the pipeline split (first stage, first chunk)."""
    account_for_loss_in_pipeline_split: bool = False
    """Megatron-Core counts the output layer and loss as one layer of the pipeline split (last stage, last chunk)."""

    def __post_init__(self) -> None:
        if self.etp == 0:
            object.__setattr__(self, "etp", self.tp)

    @property
    def counts_embedding_or_loss(self) -> bool:
        """Whether the embedding or the loss counts as a pipeline layer; Megatron-Core's split is then even
        in counted layers and never takes first/last stage counts (TransformerConfig.__post_init__)."""
        return self.account_for_embedding_in_pipeline_split or self.account_for_loss_in_pipeline_split

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def num_microbatches(self, global_batch_size: int) -> int:
        """m in the paper: micro-batches per pipeline per step (floor; validity checked elsewhere)."""
        return global_batch_size // (self.micro_batch_size * self.dp)
