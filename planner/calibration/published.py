"""Published training runs as planner inputs (specs + layout) and their measured figures.

The data file is `planner/data/published_runs.json`, a copy of the project's
shared data with a source for every row. Rows whose layout the source does not
give (the Jan-2021 README table names only the model-parallel size) are skipped.
Each run names its GPU kind (A100, H100, GB200, ...) and its source (`group`),
the unit of the per-source and leave-one-source-out report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, Hardware, HardwareProfile, NetworkSection
from planner.specs import (
    BackwardPrefetch,
    GradientLayout,
    ModelSpec,
    Precision,
    Recompute,
    RuntimeFeatures,
    TrainingSpec,
)
from planner.units import TERA

__all__ = ["DATA_FILE", "FSDP_ERA", "FSDP_ERAS", "PublishedRun", "gpu_kind_of", "megatron_model_flop", "published_runs"]

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "published_runs.json"

RUNTIME_2021: dict[str, bool] = {
    "flash_attention": False,
    "overlap_param_gather": False,
    "tp_comm_overlap": False,
    "overlap_dgrad_comm": False,
    "scatter_gather_p2p": True,
    "overlap_p2p_comm": False,
    "fused_kernels": False,
    "cuda_graphs": False,
    "ring_rails": False,
}
"""Megatron-LM as of the 2021 paper (Narayanan et al., April 2021): no fused attention, blocking p2p with
scatter/gather, eager PyTorch (one Python-launched kernel per op), no CUDA graphs, every TP collective waited
for (`RUNTIME_2022` adds what the 2022 paper's code overlaps).

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
RUNTIME_2022: dict[str, bool] = RUNTIME_2021 | {"overlap_dgrad_comm": True}
"""Megatron-LM as Korthikanti et al. 2022 ran it: the 2021 runtime, with the column-parallel layers'
input-gradient collectives overlapping the weight-gradient GEMMs (the asynchronous TP all-reduce,
`--async-tensor-model-parallel-allreduce`, on by default from commit 16c90445e7 of 2021-09-02; under
sequence parallelism the backward all-gather beside the dgrad GEMM and the reduce-scatter beside the wgrad
GEMM, commit cfd2e21607 of 2022-04-28, `megatron/mpu/layers.py`
LinearWithGradAccumulationAndAsyncCommunication.backward)."""
DROPOUT_2021 = 0.1
"""Megatron-LM's `--hidden-dropout` / `--attention-dropout` default then (and now), which the 2021/2022
runs kept: Korthikanti 2022 Table 2 counts both dropouts' masks."""

RUNTIME_2024: dict[str, bool] = {
    "flash_attention": True,
    "overlap_grad_reduce": True,
    "overlap_param_gather": True,
    "scatter_gather_p2p": True,
}
"""Megatron-Core 0.8+ / NeMo on H100 and later: Transformer Engine fused attention, DP overlaps on.

Source: the Megatron-LM README of July 2024 (commit f2e5db40, 'Training Speed and
Scalability') names --overlap-grad-reduce --overlap-param-gather and default PP
overlap; TP overlap (--tp-comm-overlap) is per row (`runtime.tp_comm_overlap`).
"""

MODERN_RUNTIME_KEYS = (
    "tp_comm_overlap",
    "cuda_graphs",
    "overlap_param_gather",
    "moe_dispatcher",
    "moe_a2a_overlap",
    "recompute_modules",
    "cuda_graph_scope",
    "expert_gemm",
    "attention_kernel",
)
"""The `RuntimeFeatures` a modern row's `runtime` may state over `RUNTIME_2024` (`tp_comm_overlap` in every row;
`attention_kernel` `flash2` where NVIDIA's launcher turned cuDNN's fused attention off, `NVTE_FUSED_ATTN: 0` in
NeMo-Framework-Launcher 24.01-24.07's `conf/config.yaml` for every model but, from July 2024, GPT-3 175B, so
Transformer Engine ran flash-attn 2; the
MoE token dispatcher and all-to-all overlap where a Megatron-Bridge MoE recipe sets them; the whole-iteration CUDA
graph and grouped expert GEMMs where a 26.06 recipe sets `cuda_graph_impl full_iteration` and
`cutedsl_fused_grouped_mlp`)."""

FSDP_ERA = "composer-fsdp-2023"
"""`runtime.era` of the PyTorch FSDP rows (MosaicML llm-foundry's MPT benchmarks, Composer, torch 2.0/2.1).

Their rows state every `RuntimeFeatures` flag in `runtime.features` and the gradient dtype in
`runtime.grad_reduce_in_fp32`, each chosen from the benchmark's configuration (the row's notes say why):
FSDP FULL_SHARD prefetches the next unit's all-gather (`overlap_param_gather`) and reduce-scatters each
unit's gradients from its post-backward hook on its own stream (`overlap_grad_reduce`), unlike DeepSpeed's
ZeRO-3 of 2021 (`_narayanan`); eager PyTorch with MPT's Triton flash attention, no Transformer Engine and no
CUDA graphs; Composer's FSDP mixed precision DEFAULT reduces in fp32, PURE in bf16. The row's
`runtime.fsdp.backward_prefetch` (Composer's default BACKWARD_POST) sets `zero3_backward_prefetch`. Every row holds its
gradients as PyTorch FSDP does (`GradientLayout.PYTORCH_FSDP`: fp32 sharded gradients, reduced in the
row's reduction dtype), set by `_fsdp` for the era, not per row.
"""

FSDP_ERAS = frozenset({FSDP_ERA, "pytorch-fsdp-2024"})
"""Eras read as PyTorch FSDP rows (`_fsdp`): MosaicML's (`FSDP_ERA`) and IBM's fms-fsdp benchmarks (eager
PyTorch FSDP FULL_SHARD with SDPA's FlashAttention-2, early 2024), each stating its runtime as above; a row may add
`layout.recompute_num_layers` (fms-fsdp's block-level selective checkpointing of a fraction of the layers)."""

_FSDP_BACKWARD_PREFETCH = {
    "BACKWARD_PRE": BackwardPrefetch.PRE,
    "BACKWARD_POST": BackwardPrefetch.POST,
    "NONE": BackwardPrefetch.NONE,
}
"""A PyTorch FSDP row's stated `runtime.fsdp.backward_prefetch` -> `RuntimeFeatures.zero3_backward_prefetch`."""

_PRECISIONS = {
    "bf16": Precision.BF16,
    "fp16": Precision.FP16,
    "fp8": Precision.FP8,
    "mxfp8": Precision.FP8,
    "nvfp4": Precision.NVFP4,
}
"""Published precision -> GEMM format. MXFP8 (block-scaled FP8, Blackwell) runs at the FP8 peak."""


def gpu_kind_of(gpu_name: str) -> str:
    """GPU family of a GPU or profile name: its first word (A100-SXM4-80GB -> A100, GB200 Blackwell ... -> GB200)."""
    return gpu_name.split("-")[0].split(" ")[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRun:
    """One measured configuration. `variant` separates the two arms of a comparison row."""

    id: str
    group: str
    """The source (one paper table, README table or documentation table): the unit of per-source reporting."""
    variant: str
    gpu_kind: str
    model: ModelSpec
    training: TrainingSpec
    layout: Layout
    num_gpus: int
    tflops_per_gpu: float | None
    step_time_s: float | None
    source: str
    gpu: str = ""
    """The GPU as the row names it (A100-SXM4-40GB, ...): picks the validation profile where a kind has two."""
    network: NetworkSection | None = None
    """The cluster's network where the source states one unlike its kind's profile (`hardware.network`: NICs per
    node and Gbit/s each); None: the profile's."""

    def hardware(self, profile: HardwareProfile) -> Hardware:
        """The hardware this run trained on: `profile` at the run's training settings
        (`HardwareProfile.training_hardware`), with the run's stated network in place of the profile's."""
        if self.network is not None:
            profile = profile.model_copy(update={"network": self.network})
        return profile.training_hardware(self.training)

    def cluster(self, profile: HardwareProfile) -> ClusterSpec:
        return ClusterSpec(profile=profile, num_gpus=self.num_gpus)


def _model(row: dict[str, Any]) -> ModelSpec:
    """The row's shape; block details default to GPT-3 style (Narayanan 2021) unless the row states them. A row
    naming a built-in `preset` (the MoE models: the preset cites the Hugging Face config its experts, router
    and attention come from) takes the preset's shape at the row's sequence length."""
    m = row["model"]
    if "preset" in m:
        shape = get_preset(m["preset"]).model
        return shape.model_copy(update={"name": row["name"], "seq_length": m["seq_len"]})
    return ModelSpec.model_validate(
        {
            "name": row["name"],
            "num_layers": m["layers"],
            "hidden_size": m["hidden"],
            "num_attention_heads": m["heads"],
            "num_query_groups": m.get("kv_heads"),
            "head_dim": m.get("head_dim"),
            "ffn_hidden_size": m.get("ffn_hidden"),
            "vocab_size": m["vocab"],
            "seq_length": m["seq_len"],
            "gated_mlp": m.get("gated_mlp", False),
            "tied_embeddings": m.get("tied_embeddings", True),
            "linear_bias": m.get("linear_bias", True),
            "learned_position_embeddings": m.get("learned_position_embeddings", True),
        }
    )


def _layout(lay: dict[str, Any], recompute: Recompute, sp: bool, zero: int) -> Layout:
    """The row's layout; the embedding and the loss count as pipeline layers, and the stages hold the layers the
    row lists (`layers_per_stage`: a recipe's uneven split), where the row says so."""
    return Layout(
        tp=lay["tp"],
        pp=lay["pp"],
        dp=lay["dp"],
        cp=lay.get("cp") or 1,
        ep=lay.get("ep") or 1,
        etp=lay.get("etp") or 0,
        vp=lay.get("virtual_stages_per_rank") or 1,
        micro_batch_size=lay["micro_batch"],
        recompute=recompute,
        sequence_parallel=sp,
        zero_stage=zero,
        account_for_embedding_in_pipeline_split=lay.get("account_for_embedding_in_pipeline_split", False),
        account_for_loss_in_pipeline_split=lay.get("account_for_loss_in_pipeline_split", False),
        layers_per_stage=tuple(lay["layers_per_stage"]) if "layers_per_stage" in lay else None,
    )


def _training_2021(
    batch: int, precision: Precision, runtime: RuntimeFeatures, *, grad_reduce_in_fp32: bool
) -> TrainingSpec:
    """A 2021/2022 paper run's training spec: its precision, runtime and gradient dtype, with the
    `DROPOUT_2021` both papers' runs kept."""
    return TrainingSpec(
        global_batch_size=batch,
        precision=precision,
        runtime=runtime,
        grad_reduce_in_fp32=grad_reduce_in_fp32,
        attention_dropout=DROPOUT_2021,
        hidden_dropout=DROPOUT_2021,
    )


def _published(
    row: dict[str, Any],
    *,
    variant: str,
    model: ModelSpec,
    training: TrainingSpec,
    layout: Layout,
    tflops_per_gpu: float | None = None,
    step_time_s: float | None = None,
) -> PublishedRun:
    """One run of `row`: the fields every row states the same way (id, group, GPU, GPUs, source) read here."""
    return PublishedRun(
        id=row["id"],
        group=row["group"],
        variant=variant,
        gpu_kind=gpu_kind_of(row["hardware"]["gpu"]),
        model=model,
        training=training,
        layout=layout,
        num_gpus=row["layout"]["gpus"],
        tflops_per_gpu=tflops_per_gpu,
        step_time_s=step_time_s,
        source=row["source"]["citation"],
        gpu=row["hardware"]["gpu"],
        network=NetworkSection.model_validate(row["hardware"]["network"]) if "network" in row["hardware"] else None,
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
    # fp16 gradients, reduced so (Narayanan 2021 Sec. 5: fp16 mixed precision)
    training = _training_2021(lay["global_batch_seqs"], Precision.FP16, runtime, grad_reduce_in_fp32=False)
    return [
        _published(
            row,
            variant="zero-3" if zero == 3 else "ptd-p",
            model=_model(row),
            training=training,
            layout=_layout(lay, Recompute.FULL, False, zero),
            tflops_per_gpu=row["measured"]["tflops_per_gpu"],
        )
    ]


def _korthikanti(row: dict[str, Any]) -> list[PublishedRun]:
    lay, measured = row["layout"], row["measured"]
    if lay.get("global_batch_seqs") is None or "iter_time_s_full_recompute" not in measured:
        return []
    runtime = RuntimeFeatures(**RUNTIME_2022 | {"overlap_grad_reduce": False})
    # bf16 with fp32 main grads, Megatron-LM's bf16 default
    training = _training_2021(lay["global_batch_seqs"], Precision.BF16, runtime, grad_reduce_in_fp32=True)
    arms = [
        ("full_recompute", Recompute.FULL, False, measured["iter_time_s_full_recompute"]),
        ("sp_selective", Recompute.SELECTIVE, True, measured["iter_time_s_present_work"]),
    ]
    return [
        _published(
            row,
            variant=variant,
            model=_model(row),
            training=training,
            layout=_layout(lay, recompute, sp, 0),
            step_time_s=seconds,
        )
        for variant, recompute, sp, seconds in arms
    ]


def megatron_model_flop(model: ModelSpec, global_batch_size: int) -> float:
    """Model FLOPs of one step as Megatron-LM logs them (the basis of its 'TFLOP/s per GPU'), flop.

    Source: Megatron-LM megatron/training/training.py, num_floating_point_operations
    (commit f2e5db40, July 2024): 12 B s l h^2 [(1 + g/a + s/h) + (f/h) m + V/(2 l h)],
    m = 3/2 for a gated MLP; dense models, no recomputation counted, full (non-causal) s^2 attention.
    """
    b, s, layers, h = global_batch_size, model.seq_length, model.num_layers, model.hidden_size
    g_over_a = model.num_query_groups / model.num_attention_heads
    gated = 1.5 if model.gated_mlp else 1.0
    per_layer = (1 + g_over_a + s / h) + model.ffn_hidden_size / h * gated + model.vocab_size / (2 * layers * h)
    return 12.0 * b * s * layers * h * h * per_layer


def _published_step_s(row: dict[str, Any], model: ModelSpec) -> float:
    """The step time a modern row states, or the one its stated throughput implies (listed in the row's `derived`)."""
    measured, lay = row["measured"], row["layout"]
    if "step_time_s" in measured:
        return float(measured["step_time_s"])
    if "tokens_per_s" in measured:
        return float(lay["global_batch_seqs"] * model.seq_length / measured["tokens_per_s"])
    if "tokens_per_s_per_gpu" in measured:
        return float(lay["global_batch_seqs"] * model.seq_length / (measured["tokens_per_s_per_gpu"] * lay["gpus"]))
    assert measured["flops_convention"] == "megatron_model_flops", row["id"]
    flop = megatron_model_flop(model, lay["global_batch_seqs"])
    return float(flop / (measured["tflops_per_gpu"] * TERA * lay["gpus"]))


_STATED_TRAINING = (
    "fp8_recipe",
    "fp8_param_gather",
    "activation_offload_layers",
    "recompute_num_layers",
    "attention_dropout",
    "hidden_dropout",
    "adam_moments",
)
"""`TrainingSpec` fields a modern row's `runtime` may state (absent: the `TrainingSpec` default)."""


def _modern(row: dict[str, Any]) -> list[PublishedRun]:
    """A Megatron-Core / NeMo era row (H100 and later): settings as published or as listed assumptions.

    `RUNTIME_2024` holds unless the row's `runtime` states a recipe's own value (`MODERN_RUNTIME_KEYS`:
    TP overlap always; CUDA graphs and parameter-gather overlap where a Megatron-Bridge recipe sets them)
    or its gradient dtype (`runtime.grad_reduce_in_fp32`; absent: the framework default), and for FP8 rows
    the scaling recipe and weight storage (`runtime.fp8_recipe`, `runtime.fp8_param_gather`; absent: Megatron-LM's
    defaults, delayed scaling and 16-bit weights; for NVFP4 rows `runtime.fp8_param_gather` is
    `--fp4-param-gather`); `runtime.activation_offload_layers` where a recipe offloads activations,
    `runtime.recompute_num_layers` where it recomputes some layers only, `runtime.attention_dropout` and
    `runtime.hidden_dropout` where a recipe trains with dropout (NeMo's GPT-3 configs); `layout.zero_stage` where it
    is not the distributed optimizer's 1 (Megatron-FSDP: 3).
    """
    lay, stated = row["layout"], row["runtime"]
    zero = lay["zero_stage"] if "zero_stage" in lay else 1 if "zero-1" in lay.get("optimizer_sharding", "") else 0
    runtime = RuntimeFeatures(**RUNTIME_2024 | {k: stated[k] for k in MODERN_RUNTIME_KEYS if k in stated})
    training = TrainingSpec(
        global_batch_size=lay["global_batch_seqs"],
        precision=_PRECISIONS[row["precision"]],
        runtime=runtime,
        grad_reduce_in_fp32=stated.get("grad_reduce_in_fp32"),
        **{k: stated[k] for k in _STATED_TRAINING if k in stated},
    )
    model = _model(row)
    layout = _layout(lay, Recompute(lay["recompute"]), lay["sequence_parallel"], zero)
    return [
        _published(
            row,
            variant=row["precision"],
            model=model,
            training=training,
            layout=layout,
            step_time_s=_published_step_s(row, model),
        )
    ]


def _fsdp(row: dict[str, Any]) -> list[PublishedRun]:
    """A PyTorch FSDP row (`FSDP_ERAS`): ZeRO-3, no tensor or pipeline parallelism, its runtime as stated, FSDP's
    gradient layout."""
    lay, runtime = row["layout"], row["runtime"]
    prefetch = _FSDP_BACKWARD_PREFETCH[runtime["fsdp"]["backward_prefetch"]]
    training = TrainingSpec(
        global_batch_size=lay["global_batch_seqs"],
        precision=_PRECISIONS[row["precision"]],
        runtime=RuntimeFeatures(**runtime["features"], zero3_backward_prefetch=prefetch),
        grad_reduce_in_fp32=runtime["grad_reduce_in_fp32"],
        gradient_layout=GradientLayout.PYTORCH_FSDP,
        recompute_num_layers=lay.get("recompute_num_layers"),
    )
    model = _model(row)
    layout = _layout(lay, Recompute(lay["recompute"]), lay["sequence_parallel"], lay["zero_stage"])
    return [
        _published(
            row,
            variant=row["precision"],
            model=model,
            training=training,
            layout=layout,
            step_time_s=_published_step_s(row, model),
        )
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
        elif row.get("runtime", {}).get("era") in FSDP_ERAS:
            runs += _fsdp(row)
        elif "runtime" in row:
            runs += _modern(row)
    return tuple(runs)
