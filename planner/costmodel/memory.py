"""Memory per GPU on the most loaded pipeline stage, by kind, in bytes.

Sources:
- Model states: Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054) Sec. 3 and
  Megatron-LM `docs/.../dist_optimizer.md`: bf16 weights 2 + fp32 grads 4 +
  Adam 12 = 18 bytes/param; fp16: 2 + 2 + 16 = 20 (`planner.numerics`). ZeRO-1 shards the optimizer
  (Megatron distributed optimizer: 6 + 12/d), ZeRO-2 also gradients, ZeRO-3
  also weights, over the dp x cp group (experts: over the expert-dp group);
  the divisor is `zero.held_params`. The held gradient is `Numerics.gradient_bytes`: Megatron's
  buffer in the reduction dtype (+ an fp32 copy at the step under 16-bit reduction), or PyTorch FSDP's fp32
  sharded gradient (`TrainingSpec.gradient_layout`, resolved in `planner.numerics`).
- Activations: Korthikanti et al. 2022 (arXiv 2205.05198) Table 2 / Eqs. 1-6
  per layer, generalised to GQA, gated MLPs and MoE; in-flight micro-batches
  from `pipeline.stage_in_flight_microbatches`; embedding and logit terms from
  Megatron-LM `theoretical_memory_usage.py`; layers offloaded to the host keep none
  (`costmodel.offload`, Transformer Engine's CPU offloading).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from planner.costmodel.candidates import (
    FULL,
    NONE,
    SELECTIVE,
    BoolArray,
    Candidates,
    FloatArray,
    IntArray,
    select_max,
    tokens_per_microbatch,
)
from planner.costmodel.elementwise import ElementwiseKernels, expanded_kv_width, kernels_for, rotated_width
from planner.costmodel.mamba import mixer_activation_bytes_per_token
from planner.costmodel.offload import offloaded_layers
from planner.costmodel.params import ParamCounts, StageShape, stage_fp8_weights, stage_kinds, stage_params
from planner.costmodel.pipeline import stage_in_flight, stage_in_flight_microbatches
from planner.costmodel.recompute import recomputed_layers, selective_modules, separate_norms_per_layer
from planner.costmodel.zero import ModelState, held_params, sharded_params
from planner.numerics import Numerics, training_numerics
from planner.profiles import ClusterSpec, Hardware
from planner.specs import ModelSpec, RecomputeModule, RuntimeFeatures, TrainingSpec
from planner.units import GIB

__all__ = [
    "MemoryBreakdown",
    "activation_bytes_per_layer",
    "activation_side_bytes",
    "memory_by_stage",
    "memory_per_gpu",
    "StageTerms",
    "all_stage_terms",
    "usable_hardware",
    "peak_stage",
    "resident_state_bytes",
    "weight_bytes",
    "stage_memory",
    "stage_terms",
    "step_can_peak",
    "step_memory",
    "training_memory",
    "working_bytes",
]

RUNTIME_ALLOWANCE_BYTES = 2 * GIB
"""CUDA context and cuBLAS/NCCL workspaces, measured at 1-2 GiB per process on A100/H100; stated allowance."""
FRAGMENTATION_FRACTION = 0.05
"""PyTorch caching-allocator fragmentation, as a fraction of activation memory; stated allowance."""


def usable_hardware(cluster: ClusterSpec, training: TrainingSpec) -> Hardware:
    """The cluster's hardware with `hbm_bytes` cut to what a plan may fill: the one usable-memory rule.

    usable = HBM x (1 - `cluster.memory_headroom`). Every fit test (search, estimate, baseline,
    stage split, diagnosis) reads `hbm_bytes` of this object, so they all apply the same headroom.
    The headroom is a stated allowance on top of `RUNTIME_ALLOWANCE_BYTES` and
    `FRAGMENTATION_FRACTION` for what the model does not count (NCCL buffers growing with the number
    of communicators, allocator blocks reserved but not handed out) and for the memory model's own
    error; `planner.profiles.DEFAULT_MEMORY_HEADROOM` states the default.
    """
    hw = cluster.profile.training_hardware(training)
    return replace(hw, hbm_bytes=hw.hbm_bytes * (1.0 - cluster.memory_headroom))


def activation_bytes_per_layer(model: ModelSpec, c: Candidates, rt: RuntimeFeatures, num: Numerics) -> FloatArray:
    """Bytes one layer keeps for backward, per micro-batch, on one GPU (Korthikanti 2022 Table 2).

    GPT with ffn = 4h, no CP and dropout on gives s b h (10 + 24/t + 5 a s/(h t))
    without SP, s b h (34/t + 5 a s/(h t)) with SP; selective recompute of the core drops the 5as/(ht)
    term (so does flash attention); full recompute keeps only the layer input,
    s b h activations of `num.activation_bytes` (2 s b h in 16-bit). The table's
    other coefficients mix 16-bit tensors and 1-byte dropout masks and stay as
    published. Without dropout the two hidden masks (1 s b h each) are not kept
    and the scores keep only the softmax output (`Numerics.attention_score_bytes`: 5 -> 2).
    Selective recompute drops what its modules rebuild (`recompute.selective_modules`, `_selective_dropped`).

    A hybrid's layer (`ModelSpec.hybrid_pattern`) holds one block behind one norm: the norm and GEMM-input terms
    count once, the attention's tensors in its attention layers' share, the MLP's in its MLP layers' and a Mamba
    mixer's (`mamba.mixer_activation_bytes_per_token`) in its Mamba layers'; an average layer, as every stage
    is priced.

    Per token, in 16-bit: the two norms' inputs (2h each) and the QKV and fc1 GEMMs' inputs (2h each, split
    by tp under SP), Q and the attention output (2q each, q = heads x head_dim, = h unless head_dim is set), K and
    V (2 kv each; under MLA Q, K and V as up-projected, `ModelSpec.query_width` and `key_value_width`, and the
    latents, `_latent_bytes_per_token`), with `qk_layernorm` Q and K once more as the norms' saved inputs
    (`ModelSpec.qk_norm_width`; TE's norm backward reads its input), and the MLP's tensors
    (`_mlp_parts_per_token`). Under FP8 the four linear layers keep their inputs' fp8 copies
    (`Numerics.saved_gemm_input_bytes`: the QKV, fc1 and fc2 inputs at one byte, the attention output kept
    by the core in 16-bit plus the output projection's fp8 copy, `Numerics.gemm_input_copy_bytes`).
    Eager model code (`RuntimeFeatures.eager_elementwise`) keeps more: each norm's fp32 input copy, RoPE's fp32 Q
    and K, K and V copied out to every query head, and a gated activation's own output
    (`costmodel.elementwise.EAGER`).
    """
    h, q = model.hidden_size, model.attention_hidden_size
    tokens = tokens_per_microbatch(model, c)
    tp = c.tp.astype(np.float64)
    sp_split = np.where(c.sequence_parallel, tp, 1.0)
    gemm_in = num.saved_gemm_input_bytes
    kernels = kernels_for(rt)
    norms_and_inputs = (model.blocks_per_layer / 2) * (
        2 * (num.activation_bytes + kernels.norm_saved_extra) + 2 * gemm_in + 2 * num.hidden_dropout_mask_bytes
    )
    replicated = norms_and_inputs * h / sp_split + _latent_bytes_per_token(model, num) / sp_split
    # Q (query_width), K and V (key_value_width) as the core reads them, the attention output (q) and its copy.
    attention = _query_key_value_bytes_per_token(model, num) + (num.activation_bytes + num.gemm_input_copy_bytes) * q
    attention = attention + num.activation_bytes * model.qk_norm_width  # the QK norms' inputs
    # Eager code (`costmodel.elementwise`): the rotation's fp32 copies, K and V copied out to every query head.
    attention = attention + kernels.rotary_saved * rotated_width(model)
    attention = attention + num.activation_bytes * expanded_kv_width(model, kernels)
    share = model.attention_layer_share
    mixer = model.mamba_layer_share * mixer_activation_bytes_per_token(model, num) if model.mamba else 0.0
    mlp = _mlp_parts_per_token(model, c, num, kernels)
    split = (share * attention + mixer) / tp + mlp.dense + mlp.routed + mlp.shared
    scores = share * num.attention_score_bytes * model.num_attention_heads * model.seq_length / tp
    kept_scores = 0.0 if rt.flash_attention else scores
    no_recompute = tokens * (replicated + split + kept_scores)
    selective = no_recompute - tokens * _selective_dropped(model, c, rt, num, kept_scores, mlp)
    layer_input = num.activation_bytes * tokens * h / np.where(c.sequence_parallel, tp, 1.0)
    return np.where(c.recompute == FULL, layer_input, np.where(c.recompute == SELECTIVE, selective, no_recompute))


def _selective_dropped(
    model: ModelSpec,
    c: Candidates,
    rt: RuntimeFeatures,
    num: Numerics,
    kept_scores: FloatArray | float,
    parts: _MlpParts,
) -> FloatArray:
    """Bytes per token of one average layer that selective recompute does not keep, by module
    (`recompute.selective_modules`; what each keeps and drops: `costmodel.recompute`'s docstring), out of the
    terms `activation_bytes_per_layer` counts.

    core_attn: the attention scores an unfused core keeps (none under flash attention). mla_up_proj: Q, K and V.
    layernorm: the output of each norm that is a module of its own (an MoE layer's pre-MLP norm; under MLA the
    input norm), one saved GEMM input of h. mlp: the dense MLP's tensors and its fused norm's output. moe_act:
    the routed experts' activation outputs (fc2's inputs). moe: every MoE-layer tensor behind its input (the routed
    copies, their expert tensors and the shared experts'). shared_experts: the shared experts' tensors.
    """
    h = model.hidden_size
    tp = c.tp.astype(np.float64)
    sp_split = np.where(c.sequence_parallel, tp, 1.0)
    norm_output = num.saved_gemm_input_bytes * h / sp_split
    reruns = selective_modules(model, rt)
    dropped: FloatArray | float = np.zeros(c.shape, dtype=np.float64)
    if RecomputeModule.CORE_ATTN in reruns:
        dropped = dropped + kept_scores
    if RecomputeModule.MLA_UP_PROJ in reruns:
        dropped = dropped + model.attention_layer_share * _query_key_value_bytes_per_token(model, num) / tp
    if RecomputeModule.LAYERNORM in reruns:
        dropped = dropped + separate_norms_per_layer(model) * norm_output
    if RecomputeModule.MLP in reruns:
        dropped = dropped + parts.dense + model.dense_mlp_share * norm_output
    if RecomputeModule.MOE in reruns:
        dropped = dropped + parts.routed + parts.shared
    else:
        if RecomputeModule.MOE_ACT in reruns:
            dropped = dropped + parts.routed_activation_outputs
        if RecomputeModule.SHARED_EXPERTS in reruns:
            dropped = dropped + parts.shared
    return np.asarray(dropped, dtype=np.float64)


def _query_key_value_bytes_per_token(model: ModelSpec, num: Numerics) -> float:
    """Q, K and V as the attention core reads them, per token over all heads (split by tp): `ModelSpec.query_width`
    plus `key_value_width` in 16-bit."""
    return float(num.activation_bytes * (model.query_width + model.key_value_width))


def _latent_bytes_per_token(model: ModelSpec, num: Numerics) -> float:
    """MLA's latents one layer keeps per token (whole on every tp rank, split by tp under SP like the layer
    input): each latent RMSNorm's input in 16-bit and its output as the up-projection's saved input
    (`Numerics.saved_gemm_input_bytes`), and the shared RoPE key part (Megatron-Core `MLASelfAttention`:
    `q_layernorm` / `kv_layernorm` ahead of `linear_q_up_proj` / `linear_kv_up_proj`). Zero without MLA."""
    mla = model.mla
    if mla is None:
        return 0.0
    latents = (mla.q_lora_rank or 0) + mla.kv_lora_rank
    rope_key = num.activation_bytes * mla.qk_pos_emb_head_dim
    return (num.activation_bytes + num.saved_gemm_input_bytes) * latents + rope_key


@dataclass(frozen=True, slots=True)
class _MlpParts:
    """MLP tensors one GPU keeps per token of its micro-batch, by part, each weighted by the share of layers holding
    it (`_mlp_parts_per_token`)."""

    dense: FloatArray
    routed: FloatArray
    routed_activation_outputs: FloatArray
    """Of `routed`: the experts' activation outputs, fc2's saved inputs (what moe_act recompute drops)."""
    shared: FloatArray


def _mlp_parts_per_token(model: ModelSpec, c: Candidates, num: Numerics, kernels: ElementwiseKernels) -> _MlpParts:
    """MLP tensors one GPU keeps per token of its micro-batch: 4 ffn (GeLU input and output) or 6 ffn (gate,
    up, SwiGLU output) in 16-bit, over tp; the activation's output is fc2's input, kept as
    `Numerics.saved_gemm_input_bytes` (1 under FP8: 3 or 5 ffn). Eager gated code keeps the activation's own
    output too (`ElementwiseKernels.gated_activation_saved_extra`).

    MoE: each of the top_k routed copies also keeps its permuted 2h input, whole on each of its expert's etp
    ranks, so etp / tp of it per token here (`compute._local_gemm`: an expert's rows are etp / tp of the
    routed tokens; the FFN-wide tensors, split over etp, come to ffn / tp per token either way).
    """
    activation_input = (
        (2 * num.activation_bytes + kernels.gated_activation_saved_extra) if model.gated_mlp else num.activation_bytes
    )
    per_ffn = activation_input + num.saved_gemm_input_bytes
    tp = c.tp.astype(np.float64)
    zero = np.zeros(c.shape, dtype=np.float64)  # every part broadcast to the candidates' shape
    dense = zero + model.dense_mlp_share * per_ffn * model.ffn_hidden_size / tp
    if model.moe is None:
        return _MlpParts(dense, zero, zero, zero)
    moe, share = model.moe, model.moe_layer_share
    ffn = moe.expert_ffn_hidden_size
    routed = zero + share * moe.top_k * (per_ffn * ffn + 2 * model.hidden_size * c.etp) / tp
    outputs = zero + share * moe.top_k * num.saved_gemm_input_bytes * ffn / tp
    shared = zero + share * moe.num_shared_experts * per_ffn * ffn / tp
    return _MlpParts(dense, routed, outputs, shared)


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes per GPU by kind; `peak` is their sum."""

    parameters: FloatArray
    gradients: FloatArray
    optimizer_states: FloatArray
    activations: FloatArray
    other: FloatArray

    @property
    def peak(self) -> FloatArray:
        return self.parameters + self.gradients + self.optimizer_states + self.activations + self.other


def working_bytes(model: ModelSpec, c: Candidates, rt: RuntimeFeatures, num: Numerics) -> FloatArray:
    """Bytes of the one layer being recomputed in backward: what it rebuilds beside what it keeps.

    Full recompute rebuilds a whole layer's activations (Korthikanti 2022 Sec. 5); selective recompute the
    tensors its modules dropped (`_selective_dropped`: without flash attention the attention scores, under MLA
    Q, K and V, and whatever else `RuntimeFeatures.recompute_modules` names), the scores those of one attention
    layer (in a hybrid, not its average over the layers).
    """
    tokens = tokens_per_microbatch(model, c)
    one_layer_scores: FloatArray | float = 0.0
    if not rt.flash_attention and model.num_attention_layers:
        one_layer_scores = num.attention_score_bytes * model.num_attention_heads * model.seq_length / c.tp
    rebuilt = tokens * _selective_dropped(
        model, c, rt, num, one_layer_scores, _mlp_parts_per_token(model, c, num, kernels_for(rt))
    )
    kept = _kept_bytes_per_layer(model, c, rt, num)
    return np.asarray(np.where(c.recompute == FULL, kept, np.where(c.recompute == SELECTIVE, rebuilt, 0.0)))


def _kept_bytes_per_layer(model: ModelSpec, c: Candidates, rt: RuntimeFeatures, num: Numerics) -> FloatArray:
    """`activation_bytes_per_layer` of the candidates without recomputation: what a layer that is not
    recomputed (or is being recomputed) holds."""
    no_recompute = Candidates(
        **{name: getattr(c, name) for name in c.__slots__} | {"recompute": np.full_like(c.recompute, NONE)}
    )
    return activation_bytes_per_layer(model, no_recompute, rt, num)


@dataclass(frozen=True, slots=True)
class StageTerms:
    """What a stage's memory is made of, before the ZeRO stage and the in-flight count are applied.

    Everything here depends only on the candidate's layer-level key, so a
    search computes it once per key (`costmodel.shared`).
    """

    params: ParamCounts
    """Parameters one GPU of the stage holds, before ZeRO sharding."""
    sharded: FloatArray
    """Parameters of one ZeRO shard of them (`zero.sharded_params`)."""
    layer_activations: FloatArray
    """Bytes one in-flight micro-batch keeps: its layers and, on the first stage, the embedding output."""
    fixed_activations: FloatArray
    """Bytes held once: the output stage's fp32 logits and the recompute working set."""
    zero3_buffer: FloatArray
    """Parameters of one layer, gathered whole under ZeRO-3 (`stage_memory` turns them into bytes)."""
    fp8_weights: FloatArray
    """FP8 linear weights one GPU of the stage holds, before ZeRO sharding (`params.stage_fp8_weights`)."""
    sharded_fp8_weights: FloatArray
    """Those of one ZeRO shard (`zero.sharded_params`)."""
    last_of_pipeline: BoolArray
    """The last stage of a pipeline with pp > 1 (`pipeline.stage_in_flight_microbatches`)."""
    middle_of_pipeline: BoolArray
    """A middle stage (pp > 2): it holds rank 1's count of micro-batches (`pipeline.stage_in_flight`)."""

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> StageTerms:
        """The terms with `fn` applied to every per-candidate array (to select, repeat or broadcast candidates)."""
        return StageTerms(
            params=self.params.map(fn),
            sharded=fn(self.sharded),
            layer_activations=fn(self.layer_activations),
            fixed_activations=fn(self.fixed_activations),
            zero3_buffer=fn(self.zero3_buffer),
            fp8_weights=fn(self.fp8_weights),
            sharded_fp8_weights=fn(self.sharded_fp8_weights),
            last_of_pipeline=fn(self.last_of_pipeline),
            middle_of_pipeline=fn(self.middle_of_pipeline),
        )


def stage_terms(
    model: ModelSpec,
    c: Candidates,
    params: ParamCounts,
    per_layer: FloatArray,
    working: FloatArray,
    stage: StageShape,
    num: Numerics,
    offload: int,
    partial: tuple[IntArray, FloatArray] | None = None,
) -> StageTerms:
    """The memory terms of one stage (`params.stage_kinds`), Korthikanti 2022 Table 2 per layer.

    The output stage keeps the final hidden states and the logits in `num.logit_bytes` (fp32) for the loss, and
    per multi-token-prediction module one more layer's activations per micro-batch in flight and its own logits.
    With `offload` layers' activations offloaded to the host (`TrainingSpec.activation_offload_layers`), a
    micro-batch keeps those of the other layers only (`offload.offloaded_layers`: at most L - k sets on the GPU).
    `partial` (block recompute, `TrainingSpec.recompute_num_layers`): the stage's recomputed layers
    (`recompute.recomputed_layers`) keep `per_layer` each, the others the bytes of a layer without recompute;
    the recompute working set then needs no room of its own when some layers are not recomputed, as
    backward reaches the first (recomputed) layers after the later ones freed theirs.
    """
    layers, embedding, output = stage
    tokens = tokens_per_microbatch(model, c)
    tp = c.tp.astype(np.float64)
    embedding_bytes = np.where(embedding, (8 + model.hidden_size) * tokens / tp, 0.0)
    heads = 1 + model.mtp_num_layers  # the output layer and each MTP module's own (their losses are kept together)
    logits = np.where(output, heads * num.logit_bytes * tokens * (model.hidden_size + model.vocab_size) / tp, 0.0)
    mtp_layers = np.where(output, model.mtp_num_layers * per_layer, 0.0)  # each MTP module's layer, in flight
    fp8 = stage_fp8_weights(model, c, layers)
    if partial is not None:  # the recomputed layers run last in backward, after the others freed their activations
        working = np.where(partial[0] < layers, 0.0, working)
    return StageTerms(
        params=params,
        sharded=sharded_params(params, c),
        layer_activations=_layer_activations(per_layer, layers, offload, partial) + embedding_bytes + mtp_layers,
        fixed_activations=logits + np.where(layers > 0, working, 0.0),
        zero3_buffer=params.total / np.maximum(layers, 1),
        fp8_weights=fp8.total,
        sharded_fp8_weights=sharded_params(fp8, c),
        last_of_pipeline=np.asarray(output & (c.pp > 1)),
        middle_of_pipeline=np.asarray(~embedding & ~output & (c.pp > 2)),
    )


def _layer_activations(
    per_layer: FloatArray, layers: IntArray, offload: int, partial: tuple[IntArray, FloatArray] | None
) -> FloatArray:
    """Bytes one in-flight micro-batch keeps in a stage's layers (`stage_terms`)."""
    if partial is None:
        return np.asarray(per_layer * (layers - offloaded_layers(offload, layers)), dtype=np.float64)
    rerun, kept = partial  # offloading needs recompute none (rule activation_offload): nothing offloaded here
    return np.asarray(per_layer * rerun + kept * (layers - rerun), dtype=np.float64)


def training_memory(c: Candidates, num: Numerics, terms: StageTerms, in_flight: FloatArray) -> MemoryBreakdown:
    """Bytes per GPU of one stage holding `in_flight` micro-batches in forward/backward: states by ZeRO
    stage (the optimizer's resident part, `Numerics.resident_optimizer_bytes`), activations.

    `in_flight` is the stage's own count (`pipeline.stage_in_flight_microbatches`).
    ZeRO-3 adds the gathered bf16 weights of the layer being computed
    (Rajbhandari 2020 Sec. 5.3; under PyTorch FSDP the prefetched unit's and the unsharded gradient too,
    `Numerics.zero3_gathered_bytes`). `num`: the training's bytes per tensor kind
    (`numerics.training_numerics`). Broadcasts over `c`, `terms` and `in_flight`. The peak is
    `resident_state_bytes` plus `activation_side_bytes`, the split the search's tables use.
    """
    activations = _activations(terms, in_flight)
    return MemoryBreakdown(
        parameters=weight_bytes(c, num, terms),
        gradients=_gradient_bytes(c, num, terms),
        optimizer_states=_resident_optimizer_bytes(c, num, terms),
        activations=activations,
        other=_allowances(activations) + _zero3_gathered_bytes(c, num, terms),
    )


def resident_state_bytes(c: Candidates, num: Numerics, terms: StageTerms) -> FloatArray:
    """The part of `training_memory` that depends on the ZeRO stage and not on the activations: weights,
    gradients, the optimizer's resident states and ZeRO-3's gathered weights. It reads only the terms a
    stage's parameters fix (not recompute or sequence parallelism)."""
    return np.asarray(
        weight_bytes(c, num, terms)
        + _gradient_bytes(c, num, terms)
        + _resident_optimizer_bytes(c, num, terms)
        + _zero3_gathered_bytes(c, num, terms),
        dtype=np.float64,
    )


def activation_side_bytes(terms: StageTerms, in_flight: FloatArray) -> FloatArray:
    """The rest of `training_memory`: activations and the allowances (runtime, fragmentation)."""
    activations = _activations(terms, in_flight)
    return np.asarray(activations + _allowances(activations), dtype=np.float64)


def _activations(terms: StageTerms, in_flight: FloatArray) -> FloatArray:
    return np.asarray(in_flight * terms.layer_activations + terms.fixed_activations, dtype=np.float64)


def _allowances(activations: FloatArray) -> FloatArray:
    return RUNTIME_ALLOWANCE_BYTES + FRAGMENTATION_FRACTION * activations


def _gradient_bytes(c: Candidates, num: Numerics, terms: StageTerms) -> FloatArray:
    return num.gradient_bytes * _held(c, terms, ModelState.GRADIENTS)


def _resident_optimizer_bytes(c: Candidates, num: Numerics, terms: StageTerms) -> FloatArray:
    return num.resident_optimizer_bytes * _held(c, terms, ModelState.OPTIMIZER)


def _zero3_gathered_bytes(c: Candidates, num: Numerics, terms: StageTerms) -> FloatArray:
    return np.where(c.zero_stage == 3, num.zero3_gathered_bytes * terms.zero3_buffer, 0.0)


def step_memory(c: Candidates, num: Numerics, terms: StageTerms) -> MemoryBreakdown:
    """Bytes per GPU of one stage at the optimizer step: the states with the optimizer's fp32 gradient copy
    (`Numerics.optimizer_state_bytes`), no activations (the last backward freed them), the runtime allowance."""
    zeros = np.zeros(np.broadcast_shapes(np.shape(c.zero_stage), np.shape(terms.sharded)))
    return MemoryBreakdown(
        parameters=weight_bytes(c, num, terms),
        gradients=_gradient_bytes(c, num, terms),
        optimizer_states=num.optimizer_state_bytes * _held(c, terms, ModelState.OPTIMIZER),
        activations=zeros,
        other=zeros + RUNTIME_ALLOWANCE_BYTES,
    )


def _held(c: Candidates, terms: StageTerms, state: ModelState) -> FloatArray:
    return held_params(c.zero_stage, state, terms.params.total, terms.sharded)


def weight_bytes(c: Candidates, num: Numerics, terms: StageTerms) -> FloatArray:
    """Bytes of the weights one GPU of the stage holds (what ZeRO leaves it): every parameter in 16-bit (the FP8
    linear layers' too, unless stored as FP8, `numerics.fp8_param_gather_on`; a ZeRO-3 shard at
    `Numerics.zero3_weight_shard_bytes`, none under PyTorch FSDP), plus the FP8 linear weights' quantized storage
    (`Numerics.quantized_weight_bytes`: Transformer Engine's cached copy, or the FP8 parameter itself)."""
    held = _held(c, terms, ModelState.PARAMETERS)
    fp8 = held_params(c.zero_stage, ModelState.PARAMETERS, terms.fp8_weights, terms.sharded_fp8_weights)
    sixteen_bit = np.where(num.fp8_weights_as_fp8_only(c.zero_stage), held - fp8, held)
    per_param = np.where(c.zero_stage == 3, num.zero3_weight_shard_bytes, num.weight_bytes)
    return np.asarray(per_param * sixteen_bit + num.quantized_weight_bytes * fp8, dtype=np.float64)


def step_can_peak(num: Numerics) -> bool:
    """Whether the optimizer step can hold more than forward/backward: only with a gradient copy to make there
    (without one the step holds the same states and the allowance, less the activations)."""
    return num.gradient_copy_bytes > 0


def stage_memory(c: Candidates, num: Numerics, terms: StageTerms, in_flight: FloatArray) -> MemoryBreakdown:
    """The stage's peak: the larger of `training_memory` and `step_memory`, with that moment's breakdown."""
    training = training_memory(c, num, terms, in_flight)
    return peak_stage((training, step_memory(c, num, terms))) if step_can_peak(num) else training


def memory_by_stage(c: Candidates, num: Numerics, terms: tuple[StageTerms, ...]) -> tuple[MemoryBreakdown, ...]:
    """Memory of each stage (`StageKind` order) from its terms."""
    in_flight = stage_in_flight(c)
    return tuple(
        stage_memory(c, num, t, stage_in_flight_microbatches(in_flight, t.last_of_pipeline, t.middle_of_pipeline))
        for t in terms
    )


def all_stage_terms(
    model: ModelSpec,
    c: Candidates,
    training: TrainingSpec,
    num: Numerics,
    stage_params: tuple[ParamCounts, ...],
    per_layer: FloatArray,
) -> tuple[StageTerms, ...]:
    """`stage_terms` of the first, middle and last stage (`StageKind` order); `per_layer` is
    `activation_bytes_per_layer` of `c` (the caller's, which the offload time reads too)."""
    working = working_bytes(model, c, training.runtime, num)
    block = training.recompute_num_layers
    kept = None if block is None else _kept_bytes_per_layer(model, c, training.runtime, num)
    return tuple(
        stage_terms(
            model,
            c,
            params,
            per_layer,
            working,
            stage,
            num,
            training.activation_offload_layers,
            None if kept is None else (recomputed_layers(c, stage.layers, block), kept),
        )
        for params, stage in zip(stage_params, stage_kinds(c), strict=True)
    )


def peak_stage(stages: tuple[MemoryBreakdown, ...]) -> MemoryBreakdown:
    """Per candidate, the breakdown of the stage with the highest peak."""
    names = MemoryBreakdown.__slots__
    chosen = select_max([s.peak for s in stages], *([getattr(s, name) for s in stages] for name in names))
    return MemoryBreakdown(*chosen)


def memory_per_gpu(model: ModelSpec, c: Candidates, training: TrainingSpec, hw: Hardware) -> MemoryBreakdown:
    """Peak bytes per GPU with breakdown, on the stage that needs the most (direct, unshared path)."""
    num = training_numerics(training, hw)
    params = tuple(stage_params(model, c, stage) for stage in stage_kinds(c))
    per_layer = activation_bytes_per_layer(model, c, training.runtime, num)
    terms = all_stage_terms(model, c, training, num, params, per_layer)
    return peak_stage(memory_by_stage(c, num, terms))
