"""The candidate layout: how one training job is split over the GPUs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from planner.specs import Recompute, RecomputeModule, TrainingSpec

__all__ = ["Layout", "by_training", "recompute_text", "training_for", "with_modules"]

T = TypeVar("T")


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
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    """The modules selective recompute reruns in this layout (Megatron-Core `--recompute-modules`), in
    `RecomputeModule`'s order; None: the request's (`RuntimeFeatures.recompute_modules`, or its default). The search
    sets it where it tries a recipe's set (`recompute.searched_module_sets`); `training_for` resolves it."""

    def __post_init__(self) -> None:
        if self.etp == 0:
            object.__setattr__(self, "etp", self.tp)
        if self.recompute_modules is not None:
            chosen = set(self.recompute_modules)
            object.__setattr__(self, "recompute_modules", tuple(m for m in RecomputeModule if m in chosen))

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


def training_for(training: TrainingSpec, layout: Layout) -> TrainingSpec:
    """The training `layout` runs: the request's, with the layout's own selective-recompute module set where it
    names one (`Layout.recompute_modules`). The one place a layout's set reaches the cost model, the rules and the
    launches."""
    return training if layout.recompute_modules is None else with_modules(training, layout.recompute_modules)


def with_modules(training: TrainingSpec, modules: tuple[RecomputeModule, ...]) -> TrainingSpec:
    """`training` with selective recompute over `modules` (`RuntimeFeatures.recompute_modules`)."""
    if modules == training.runtime.recompute_modules:
        return training
    return training.model_copy(update={"runtime": training.runtime.model_copy(update={"recompute_modules": modules})})


def by_training(
    training: TrainingSpec, layouts: Sequence[Layout], each: Callable[[TrainingSpec, list[Layout]], list[T]]
) -> list[T]:
    """`each(run, group)` over the layouts grouped by the training they run (`training_for`; one group, the
    request's training, unless some layout names its own module set), its results back in the layouts' order."""
    groups: dict[tuple[RecomputeModule, ...] | None, list[int]] = {}
    for i, x in enumerate(layouts):
        groups.setdefault(x.recompute_modules, []).append(i)
    out: dict[int, T] = {}
    for indexes in groups.values():
        group = [layouts[i] for i in indexes]
        out.update(zip(indexes, each(training_for(training, group[0]), group), strict=True))
    return [out[i] for i in range(len(layouts))]


def recompute_text(recompute: Recompute, modules: Sequence[RecomputeModule] | None) -> str:
    """A layout's recompute in one word, selective recompute of named modules with them (`selective[layernorm,moe_act]`,
    names sorted), as the command line's tables show it."""
    named = f"[{','.join(sorted(str(m) for m in modules))}]" if modules and recompute == Recompute.SELECTIVE else ""
    return f"{Recompute(recompute).value}{named}"
