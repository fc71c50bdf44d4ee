"""What recomputation reruns: which modules selective recompute covers, and which layers full recomputation reruns
(every layer, or the first k of each pipeline stage, block).

Selective recompute is Megatron-Core's `recompute_granularity = selective` over `recompute_modules`
(`RuntimeFeatures.recompute_modules`; `selective_modules` is the one place that resolves it). Unset, the planner
reruns the attention core (Korthikanti et al. 2022, arXiv 2205.05198, Sec. 5), and with multi-latent attention also
MLA's up-projections and RoPE ("mla_up_proj", output-discarding checkpointing: Q, K and V are not kept, only the
latents they come from; `TransformerConfig.recompute_modules`, core_v0.15.0), as 22 of the 28 selective DeepSeek-V3
recipes of NeMo and Megatron-Bridge list it (tests/data/nvidia_moe_recipes.json; the others list mlp or core_attn
alone). The other modules (core_v0.15.0 to core_v0.19.0 `TransformerConfig.recompute_modules` docstring;
`transformer_layer.py`, `moe/moe_layer.py`, `moe/experts.py`):

- layernorm: the norms that are modules of their own (`TransformerLayer.recompute_input_layernorm` and
  `recompute_pre_mlp_layernorm` are set only where the norm is not an `IdentityOp`, i.e. not fused into the next
  Transformer Engine linear layer): an MoE layer's pre-MLP norm, and under MLA the input norm. Output-discarding:
  the norm's output is dropped and rebuilt from its input, which the residual keeps anyway.
- mlp: the dense MLP under normal checkpointing: its input is kept, its fused norm's output and its inner tensors
  are not.
- moe_act: the routed experts' activation (`TEGroupedMLP`, output-discarding): fc2's input is rebuilt from fc1's
  output.
- moe: the whole MoE layer under normal checkpointing (`MoELayer`, `tensor_parallel.checkpoint`): only its input is
  kept; the backward reruns the router, the dispatch and combine all-to-alls and the experts.
- shared_experts: the shared experts under normal checkpointing.

Source: Megatron-Core `TransformerConfig.recompute_method` (core_v0.16.1
`transformer_config.py`: "block will recompute the input activations for only a
set number of transformer layers per pipeline stage. The rest of the layers in
the pipeline stage will not have any activations recomputed") and
`TransformerBlock._checkpointed_forward` (block: layers with index below
`recompute_num_layers` run checkpointed, the rest plainly). Without
interleaving a stage is one `TransformerBlock`; with it each of its vp model chunks is one, so a stage reruns
min(layers, vp x recompute_num_layers) layers (`recomputed_layers`): exact where the stage's chunks are even or
every chunk holds at least recompute_num_layers layers, a little high where an end chunk is short (the embedding
or the loss counted as a layer) and holds fewer.
"""

from __future__ import annotations

import numpy as np

from planner.costmodel.candidates import FULL, SELECTIVE, Candidates, FloatArray, IntArray
from planner.costmodel.params import stage_kinds
from planner.specs import ModelSpec, RecomputeModule, RuntimeFeatures, TrainingSpec

__all__ = [
    "RECIPE_MODULE_SETS",
    "missing_module",
    "own_selective_modules",
    "searched_module_sets",
    "recomputed_layers",
    "recomputed_layers_in_model",
    "recomputed_share",
    "full_recompute_reruns",
    "dispatch_reruns",
    "default_is_idle",
    "default_selective_modules",
    "selective_modules",
    "separate_norms_per_layer",
]


def default_selective_modules(model: ModelSpec) -> tuple[RecomputeModule, ...]:
    """What selective recompute reruns when `RuntimeFeatures.recompute_modules` is unset: the attention core, and
    under MLA the up-projections too (module docstring)."""
    core = (RecomputeModule.CORE_ATTN,)
    return (*core, RecomputeModule.MLA_UP_PROJ) if model.mla is not None else core


def selective_modules(model: ModelSpec, rt: RuntimeFeatures) -> tuple[RecomputeModule, ...]:
    """The modules selective recompute reruns for this model and runtime, in `RecomputeModule`'s order: the one
    resolution of `RuntimeFeatures.recompute_modules` (its default: `default_selective_modules`)."""
    chosen = rt.recompute_modules or default_selective_modules(model)
    return tuple(m for m in RecomputeModule if m in chosen)


RECIPE_MODULE_SETS: tuple[tuple[RecomputeModule, ...], ...] = (
    (RecomputeModule.CORE_ATTN,),
    (RecomputeModule.MLA_UP_PROJ,),
    (RecomputeModule.MLP,),
    (RecomputeModule.MLA_UP_PROJ, RecomputeModule.MLP),
    (RecomputeModule.MLA_UP_PROJ, RecomputeModule.MLP, RecomputeModule.MOE),
    (RecomputeModule.LAYERNORM, RecomputeModule.MOE_ACT),
    (RecomputeModule.CORE_ATTN, RecomputeModule.LAYERNORM, RecomputeModule.MOE_ACT, RecomputeModule.MOE),
)
"""The module sets NVIDIA's performance recipes run selective recompute with, each in `RecomputeModule`'s order:
DeepSeek-V3's mla_up_proj, mlp, mla_up_proj + mlp, mla_up_proj + mlp + moe and core_attn, GPT-OSS's layernorm +
moe_act (NeMo 2.3-2.6 and Megatron-Bridge 26.04 perf configs, as `tests/data/nvidia_moe_recipes.json` records them),
and Nemotron 3 Nano's core_attn + layernorm + moe_act + moe (Megatron-Bridge 26.04.01, the published row's recipe).
The search tries those of them a model has (`searched_module_sets`)."""


def missing_module(model: ModelSpec, module: RecomputeModule) -> str | None:
    """Why `model` has nothing for `module` to rerun (Megatron-Core would accept the name and do nothing), or None
    when it has: mla_up_proj needs multi-latent attention, mlp a dense MLP layer, moe and moe_act an MoE layer,
    shared_experts a shared expert, layernorm a norm that is a module of its own (`separate_norms_per_layer`)."""
    lacks = {
        RecomputeModule.MLA_UP_PROJ: (model.mla is None, "model.mla is unset (no multi-latent attention)"),
        RecomputeModule.MLP: (model.num_dense_layers == 0, "the model has no dense MLP layer"),
        RecomputeModule.MOE: (model.moe is None, "model.moe is unset (no MoE layer)"),
        RecomputeModule.MOE_ACT: (model.moe is None, "model.moe is unset (no MoE layer)"),
        RecomputeModule.SHARED_EXPERTS: (
            model.moe is None or not model.moe.num_shared_experts,
            "the model has no shared expert",
        ),
        RecomputeModule.LAYERNORM: (
            separate_norms_per_layer(model) == 0,
            "every norm of the model is fused into its next linear layer (no MoE layer, no multi-latent attention)",
        ),
    }
    missing, why = lacks.get(module, (False, ""))
    return why if missing else None


def _without_idle_core(modules: tuple[RecomputeModule, ...], training: TrainingSpec) -> tuple[RecomputeModule, ...]:
    """`modules` without core_attn under flash attention: the core keeps no scores there, so rerunning it frees
    nothing and costs the core's forward, and a set with it never beats the same set without it."""
    if not training.runtime.flash_attention:
        return modules
    return tuple(m for m in modules if m is not RecomputeModule.CORE_ATTN)


def default_is_idle(model: ModelSpec, training: TrainingSpec) -> bool:
    """Whether the request's selective recompute reruns nothing but an idle core_attn: it names no set and its
    default (`default_selective_modules`) is empty without core_attn (`_without_idle_core`), so each selective
    layout keeps what the same layout without recompute keeps, and takes longer."""
    default = default_selective_modules(model)
    return training.runtime.recompute_modules is None and not _without_idle_core(default, training)


def own_selective_modules(model: ModelSpec, training: TrainingSpec) -> tuple[RecomputeModule, ...] | None:
    """The set the request's own space reruns under selective recompute where it is not the request's default as
    is: under flash attention a default holding core_attn beside other modules (MLA's core_attn + mla_up_proj)
    runs without core_attn (`_without_idle_core`). None otherwise: the request names its set, or the default
    stays (core_attn alone, `default_is_idle`: the search leaves it out where recompute none is allowed)."""
    if training.runtime.recompute_modules is not None:
        return None
    default = default_selective_modules(model)
    reduced = _without_idle_core(default, training)
    return reduced if reduced and reduced != default else None


def searched_module_sets(model: ModelSpec, training: TrainingSpec) -> tuple[tuple[RecomputeModule, ...], ...]:
    """Module sets the search tries for selective recompute besides the request's own: the recipes' sets
    (`RECIPE_MODULE_SETS`) whose every module the model has, without core_attn under flash attention
    (`_without_idle_core`; a set of core_attn alone is dropped), other than the one the request's own space
    already runs (`own_selective_modules`, else `default_selective_modules`). None when the request names its set
    (`RuntimeFeatures.recompute_modules`): that set is then the only one."""
    if training.runtime.recompute_modules is not None:
        return ()
    own = own_selective_modules(model, training) or default_selective_modules(model)
    useful = (s for s in RECIPE_MODULE_SETS if all(missing_module(model, m) is None for m in s))
    kept = dict.fromkeys(s for m in useful if (s := _without_idle_core(m, training)) and s != own)  # first seen
    return tuple(kept)


def separate_norms_per_layer(model: ModelSpec) -> float:
    """Norms per average layer that are modules of their own, what layernorm recompute reruns (module docstring): an
    MoE layer's pre-MLP norm, in the MoE layers' share, and under MLA the attention's input norm, in the attention
    layers' share; the others are fused into Transformer Engine's LayerNormLinear / LayerNormMLP. Zero: layernorm
    recompute would do nothing (rule recompute_modules refuses it)."""
    attention = model.attention_layer_share if model.mla is not None else 0.0
    return float(model.moe_layer_share + attention)


def recomputed_layers(c: Candidates, layers: IntArray, block: int | None) -> IntArray:
    """Layers of a stage of `layers` layers that run their recompute mode: under full recompute with `block`
    (`TrainingSpec.recompute_num_layers`) the first `block` of each of its vp model chunks, min(layers, vp x block)
    (module docstring); otherwise all of them (selective recompute reruns every layer's attention core; none
    reruns nothing, whatever the count)."""
    if block is None:
        return layers
    return np.asarray(np.where(c.recompute == FULL, np.minimum(layers, block * c.vp), layers))


def recomputed_layers_in_model(c: Candidates, block: int | None) -> FloatArray:
    """`recomputed_layers` summed over the pipeline's stages (one first, pp - 2 middle, one last stage; the
    only stage when pp = 1): the layers whose recompute mode runs, of `num_layers`."""
    first, middle, last = (recomputed_layers(c, s.layers, block) for s in stage_kinds(c))
    return np.asarray(first + np.maximum(c.pp - 2, 0) * middle + np.where(c.pp > 1, last, 0), dtype=np.float64)


def recomputed_share(model: ModelSpec, c: Candidates, block: int | None) -> FloatArray | float:
    """Share of the model's layers whose recompute mode runs: 1 without block recompute, else
    `recomputed_layers_in_model` / num_layers."""
    return 1.0 if block is None else recomputed_layers_in_model(c, block) / model.num_layers


def full_recompute_reruns(model: ModelSpec, c: Candidates, block: int | None) -> FloatArray:
    """Forward reruns of one average layer and micro-batch that full recomputation adds, with their collectives
    (TP, CP, EP and ZeRO-3 gathers): the share of layers it reruns (`recomputed_share`, 1 without block
    recompute); none under selective recompute (its core rerun moves nothing) or without recompute."""
    return np.asarray(np.where(c.recompute == FULL, recomputed_share(model, c, block), 0.0), dtype=np.float64)


def dispatch_reruns(model: ModelSpec, c: Candidates, rt: RuntimeFeatures, block: int | None) -> FloatArray:
    """Forward reruns of one average layer's MoE dispatch and combine per micro-batch: a full recompute's
    (`full_recompute_reruns`), or one where selective recompute covers the whole MoE layer (moe; module docstring)."""
    whole_moe = RecomputeModule.MOE in selective_modules(model, rt)
    selective = np.where((c.recompute == SELECTIVE) & whole_moe, 1.0, 0.0)
    return np.asarray(full_recompute_reruns(model, c, block) + selective, dtype=np.float64)
