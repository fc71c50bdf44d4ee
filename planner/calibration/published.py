"""Published training runs as planner inputs (specs + layout) and their measured figures.

The data file is `planner/data/published_runs.json`, a copy of the project's
shared data with a source for every row. Rows whose layout the source does not
give (the Jan-2021 README table names only the model-parallel size) are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from planner.layout import Layout
from planner.profiles import ClusterSpec, HardwareProfile
from planner.specs import ModelSpec, Precision, Recompute, RuntimeFeatures, TrainingSpec

__all__ = ["DATA_FILE", "PublishedRun", "published_runs"]

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "published_runs.json"

RUNTIME_2021: dict[str, bool] = {
    "flash_attention": False,
    "overlap_param_gather": False,
    "tp_comm_overlap": False,
    "scatter_gather_p2p": True,
    "ring_rails": False,
}
"""Megatron-LM as of the 2021/2022 papers: no fused attention, blocking p2p with scatter/gather.

`ring_rails` off: Narayanan 2021 Table 2's ZeRO-3 rows (DeepSpeed of 2021, eight
data-parallel ranks per node) keep the same step time from 768 to 1536 GPUs while
compute per GPU halves, the signature of a fixed per-GPU transfer at one NIC share
(~22 GB/s for 4 x 349 GB in ~62 s), not of rings over eight rails (~8x faster)
nor of latency-bound gathers, whose cost grows with the rank count: with eight
rails, DeepSpeed 0.3's one `all_gather` per parameter tensor (`_allgather_param`)
under NCCL's latency model still predicts +35% to +107% over the published
throughput. The mechanism is not identified; the flag
states the behaviour. Only rows with several ranks of a crossing group per node
(the ZeRO-3 rows) see it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRun:
    """One measured configuration. `variant` separates the two arms of a comparison row."""

    id: str
    group: str
    variant: str
    model: ModelSpec
    training: TrainingSpec
    layout: Layout
    num_gpus: int
    tflops_per_gpu: float | None
    step_time_s: float | None
    source: str

    def cluster(self, profile: HardwareProfile) -> ClusterSpec:
        return ClusterSpec(profile=profile, num_gpus=self.num_gpus)


def _model(row: dict[str, Any]) -> ModelSpec:
    m = row["model"]
    return ModelSpec(
        name=row["name"],
        num_layers=m["layers"],
        hidden_size=m["hidden"],
        num_attention_heads=m["heads"],
        num_query_groups=m.get("kv_heads", m["heads"]),
        ffn_hidden_size=m.get("ffn_hidden", 4 * m["hidden"]),
        vocab_size=m["vocab"],
        seq_length=m["seq_len"],
        tied_embeddings=True,
        linear_bias=True,
        learned_position_embeddings=True,
    )


def _layout(lay: dict[str, Any], recompute: Recompute, sp: bool, zero: int) -> Layout:
    return Layout(
        tp=lay["tp"],
        pp=lay["pp"],
        dp=lay["dp"],
        vp=lay.get("virtual_stages_per_rank") or 1,
        micro_batch_size=lay["micro_batch"],
        recompute=recompute,
        sequence_parallel=sp,
        zero_stage=zero,
    )


def _narayanan(row: dict[str, Any]) -> list[PublishedRun]:
    lay = row["layout"]
    zero = lay.get("zero_stage") or 0
    # PyTorch DDP overlaps the gradient all-reduce with backward, Megatron's "local" DDP does not;
    # DeepSpeed ZeRO-3 prefetches parameters but reduces gradients after each layer's backward.
    overlap_grads = lay.get("ddp_impl") == "torch"
    runtime = RuntimeFeatures(
        **RUNTIME_2021 | {"overlap_grad_reduce": overlap_grads, "overlap_param_gather": zero == 3}
    )
    training = TrainingSpec(global_batch_size=lay["global_batch_seqs"], precision=Precision.FP16, runtime=runtime)
    return [
        PublishedRun(
            id=row["id"],
            group=row["group"],
            variant="zero-3" if zero == 3 else "ptd-p",
            model=_model(row),
            training=training,
            layout=_layout(lay, Recompute.FULL, False, zero),
            num_gpus=lay["gpus"],
            tflops_per_gpu=row["measured"]["tflops_per_gpu"],
            step_time_s=None,
            source=row["source"]["citation"],
        )
    ]


def _korthikanti(row: dict[str, Any]) -> list[PublishedRun]:
    lay, measured = row["layout"], row["measured"]
    if lay.get("global_batch_seqs") is None or "iter_time_s_full_recompute" not in measured:
        return []
    runtime = RuntimeFeatures(**RUNTIME_2021 | {"overlap_grad_reduce": False})
    training = TrainingSpec(global_batch_size=lay["global_batch_seqs"], precision=Precision.BF16, runtime=runtime)
    arms = [
        ("full_recompute", Recompute.FULL, False, measured["iter_time_s_full_recompute"]),
        ("sp_selective", Recompute.SELECTIVE, True, measured["iter_time_s_present_work"]),
    ]
    return [
        PublishedRun(
            id=row["id"],
            group=row["group"],
            variant=variant,
            model=_model(row),
            training=training,
            layout=_layout(lay, recompute, sp, 0),
            num_gpus=lay["gpus"],
            tflops_per_gpu=None,
            step_time_s=seconds,
            source=row["source"]["citation"],
        )
        for variant, recompute, sp, seconds in arms
    ]


@cache
def published_runs() -> tuple[PublishedRun, ...]:
    """Every run whose layout is published, in file order."""
    rows = json.loads(DATA_FILE.read_text())["runs"]
    runs: list[PublishedRun] = []
    for row in rows:
        if row["group"].startswith("Narayanan2021"):
            runs += _narayanan(row)
        elif row["group"] == "Korthikanti2022":
            runs += _korthikanti(row)
    return tuple(runs)
