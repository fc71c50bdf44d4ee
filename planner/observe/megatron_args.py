"""Megatron-Core settings (Megatron-LM argument names) -> the planner's request fields.

The inverse of `planner.launch.megatron` (request -> flags): one table of the correspondence, read by the
Megatron-LM argument dump and by Megatron-Bridge's configuration (whose names `planner.observe.bridge`
translates to these first). Names and defaults: Megatron-LM core_v0.15.0 `megatron/training/arguments.py`
(`_add_*_args`, `validate_args`); Megatron-Core `TransformerConfig` for the Bridge spellings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.launch.common import MEGATRON_ATTENTION_BACKENDS
from planner.launch.pipeline_layout import layout_chunks
from planner.observe.observation import refuse
from planner.rules.core import rank_chunks
from planner.specs import HYBRID_LAYER_SYMBOLS, AttentionKernel, Fp8Recipe, RecomputeModule, RouterLoadBalancing

__all__ = ["REQUIRED", "megatron_request", "padded_vocab_size"]

REQUIRED = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "seq_length",
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "micro_batch_size",
    "global_batch_size",
)
"""Settings without which no layout or shape can be recovered."""

_SHAPE = {
    "num_layers": "num_layers",
    "hidden_size": "hidden_size",
    "num_attention_heads": "num_attention_heads",
    "ffn_hidden_size": "ffn_hidden_size",
    "seq_length": "seq_length",
}
"""Megatron name -> ModelSpec field, copied as is (integers)."""
_LAYOUT = {
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
    "expert_model_parallel_size": "ep",
    "micro_batch_size": "micro_batch_size",
}
"""Megatron name -> layout field (integers, default 1)."""
_RUNTIME = {
    "overlap_grad_reduce": "overlap_grad_reduce",
    "overlap_param_gather": "overlap_param_gather",
    "tp_comm_overlap": "tp_comm_overlap",
    "overlap_moe_expert_parallel_comm": "moe_a2a_overlap",
}
"""Megatron switch -> RuntimeFeatures field (Megatron-LM default: off)."""
_ZERO_OF_SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
"""Megatron FSDP `--data-parallel-sharding-strategy` -> ZeRO stage (the launch writes 2 and 3 this way)."""


def padded_vocab_size(vocab_size: int, divisible_by: int, tp: int) -> int:
    """The vocabulary rounded up to a multiple of divisible_by * tp.

    Source: Megatron-LM megatron/training/tokenizer/tokenizer.py `_vocab_size_with_padding`; Megatron-Bridge
    src/megatron/bridge/utils/vocab_utils.py `calculate_padded_vocab_size` (the same rule).
    """
    multiple = divisible_by * tp
    return -(-vocab_size // multiple) * multiple


def _int(args: Mapping[str, Any], name: str, where: str, default: int | None = None) -> int:
    value = args.get(name)
    value = default if value is None else value
    if value is None:
        refuse(f"{name} not in the {where}")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        refuse(f"{name} = {value!r} in the {where} is not a positive integer")
    return value


def _on(args: Mapping[str, Any], name: str) -> bool:
    return args.get(name) is True


def _moe(args: Mapping[str, Any], where: str, num_layers: int) -> dict[str, Any] | None:
    """num_experts, moe_router_topk, moe_ffn_hidden_size, moe_shared_expert_intermediate_size, moe_layer_freq, and
    the router (`_router`)."""
    if args.get("num_experts") is None:
        return None
    expert_ffn = _int(args, "moe_ffn_hidden_size", where, args.get("ffn_hidden_size"))
    moe: dict[str, Any] = {
        "num_experts": _int(args, "num_experts", where),
        "top_k": _int(args, "moe_router_topk", where, 2),
        "expert_ffn_hidden_size": expert_ffn,
    }
    shared = args.get("moe_shared_expert_intermediate_size")
    if shared:
        if shared % expert_ffn:
            refuse(f"moe_shared_expert_intermediate_size({shared}) is not a multiple of moe_ffn_hidden_size")
        moe["num_shared_experts"] = shared // expert_ffn
    freq = args.get("moe_layer_freq", 1)
    if isinstance(freq, list):
        moe |= _layer_pattern(freq, num_layers)
    elif isinstance(freq, int) and freq >= 1:
        moe["moe_layer_freq"] = freq
    else:
        refuse(f"moe_layer_freq = {freq!r} in the {where} is neither an integer nor a list of 0/1")
    return moe | _router(args, where)


def _router(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """MoESpec's router fields from moe_router_score_function, moe_router_pre_softmax, moe_router_enable_expert_bias,
    moe_router_num_groups / moe_router_group_topk, moe_router_topk_scaling_factor, moe_apply_probs_on_input and the
    load-balancing loss (`_balancing`), each left at MoESpec's default where the args leave it at Megatron-Core's."""
    router: dict[str, Any] = {}
    score = args.get("moe_router_score_function") or "softmax"
    if score not in ("softmax", "sigmoid"):
        refuse(f"moe_router_score_function = {score!r} in the {where} is not modelled (softmax, sigmoid are)")
    if score != "softmax":
        router["router_score_function"] = score
    if _on(args, "moe_router_pre_softmax") and score == "softmax":
        router["router_pre_softmax"] = True
    if _on(args, "moe_router_enable_expert_bias"):
        router["router_expert_bias"] = True
    if args.get("moe_router_num_groups") is not None or args.get("moe_router_group_topk") is not None:
        router["router_num_groups"] = _int(args, "moe_router_num_groups", where)
        router["router_group_topk"] = _int(args, "moe_router_group_topk", where)
    factor = args.get("moe_router_topk_scaling_factor")
    if factor is not None:
        if isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 0:
            refuse(f"moe_router_topk_scaling_factor = {factor!r} in the {where} is not a positive number")
        router["router_topk_scaling_factor"] = float(factor)
    if _on(args, "moe_apply_probs_on_input"):
        router["router_score_before_experts"] = True
    return router | _balancing(args, where)


def _balancing(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """MoESpec's load-balancing loss from moe_router_load_balancing_type and moe_aux_loss_coeff (either may be a
    one-item list, as Megatron-Core accepts; several losses at once and sinkhorn routing are not modelled)."""
    kind, weight = args.get("moe_router_load_balancing_type", "aux_loss"), args.get("moe_aux_loss_coeff", 0.0)
    if isinstance(kind, list) and len(kind) == 1 and isinstance(weight, list) and len(weight) == 1:
        kind, weight = kind[0], weight[0]
    modelled = [m.value for m in RouterLoadBalancing]
    if kind not in modelled:
        refuse(
            f"moe_router_load_balancing_type = {kind!r} in the {where} is not modelled"
            f" (one of {', '.join(modelled)} is)"
        )
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
        refuse(f"moe_aux_loss_coeff = {weight!r} in the {where} is not a number in [0, 1]")
    balancing: dict[str, Any] = {}
    if kind != RouterLoadBalancing.AUX_LOSS:
        balancing["router_load_balancing"] = kind
    if weight and kind != RouterLoadBalancing.NONE:  # Megatron-Core weighs no loss under none, whatever the coefficient
        balancing["router_aux_loss_coeff"] = float(weight)
    return balancing


def _layer_pattern(pattern: list[Any], num_layers: int) -> dict[str, int]:
    """A 0/1 list (1: MoE layer) as first_k_dense_layers and moe_layer_freq, if it is that regular shape."""
    ones = [i for i, v in enumerate(pattern) if v == 1]
    if len(pattern) != num_layers or not ones:
        refuse(f"moe_layer_freq lists {len(pattern)} layers with {len(ones)} MoE layers; num_layers is {num_layers}")
    k = ones[0]
    freq = ones[1] - ones[0] if len(ones) > 1 else 1
    if [int(i >= k and (i - k) % freq == 0) for i in range(num_layers)] != [int(v == 1) for v in pattern]:
        refuse("moe_layer_freq pattern is not k dense layers then every n-th layer MoE; the planner cannot express it")
    return {"first_k_dense_layers": k, "moe_layer_freq": freq}


_MLA_DEFAULTS = {"kv_lora_rank": 32, "qk_head_dim": 128, "qk_pos_emb_head_dim": 64, "v_head_dim": 128}
"""Megatron-LM's `_add_mla_args` defaults (--q-lora-rank defaults to None: no query latent)."""


def _mla(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """ModelSpec.mla from the run's MLA arguments, each at Megatron-LM's default when the args leave it out."""
    q_lora_rank = _int(args, "q_lora_rank", where) if args.get("q_lora_rank") is not None else None
    return {"q_lora_rank": q_lora_rank} | {name: _int(args, name, where, d) for name, d in _MLA_DEFAULTS.items()}


def _hybrid(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A hybrid model's layer pattern and Mamba mixer (`ModelSpec.hybrid_pattern`, `mamba`): Megatron-LM's
    `--hybrid-layer-pattern` (its deprecated spelling `--hybrid-override-pattern`, which validate_args copies
    over; Megatron-Bridge's `hybrid_layer_pattern`) and `--mamba-state-dim`, `--mamba-head-dim`,
    `--mamba-num-groups` (defaults 128, 64, 8) and `--mamba-num-heads`; empty for a transformer. Megatron
    derives num_layers from the pattern. Pipeline separators (|, core_v0.19) are the stage split, read by
    `_layout`; MTP segments (/) and layer kinds other than M, *, - and E (GDN, ...) are refused: not modelled."""
    piped = _hybrid_pattern(args)
    if piped is None:
        return {}
    symbols = set(HYBRID_LAYER_SYMBOLS)
    pattern = piped.replace(HYBRID_STAGE_SEPARATOR, "")
    if not pattern or not set(pattern) <= symbols:
        refuse(
            f"hybrid layer pattern {piped!r} in the {where} is not modelled: only {''.join(sorted(symbols))} layers"
            f" and {HYBRID_STAGE_SEPARATOR!r} between pipeline stages (no MTP segments or other layer kinds)"
        )
    hybrid: dict[str, Any] = {"hybrid_pattern": pattern, "num_layers": len(pattern)}
    if "M" in pattern:
        mamba = {
            "state_dim": _int(args, "mamba_state_dim", where, 128),
            "head_dim": _int(args, "mamba_head_dim", where, 64),
            "num_groups": _int(args, "mamba_num_groups", where, 8),
        }
        if args.get("mamba_num_heads") is not None:
            mamba["num_heads"] = _int(args, "mamba_num_heads", where)
        hybrid["mamba"] = mamba
    return hybrid


HYBRID_STAGE_SEPARATOR = "|"
"""Megatron-LM core_v0.19's separator between the pipeline's virtual stages in `--hybrid-layer-pattern`."""


def _hybrid_pattern(args: Mapping[str, Any]) -> str | None:
    """The hybrid layer pattern as the run states it (either spelling), separators included; None for a
    transformer."""
    pattern = args.get("hybrid_layer_pattern") or args.get("hybrid_override_pattern")
    return None if pattern is None else str(pattern)


def _hybrid_split(piped: str, pp: int, where: str) -> tuple[list[int], int] | None:
    """(layers per stage, vp) of a hybrid pattern cut by "|" into pp x vp virtual stages, virtual stage i being
    model chunk i // pp of pipeline rank i mod pp (Megatron-LM core_v0.19.0 `hybrid_layer_allocation.py`
    select_pipeline_segment; validate_args: vp = segments / pp); None without separators. Refused unless the
    segments are a multiple of pp and the ranks' chunks are the planner's (`planner.rules.core.rank_chunks`)."""
    if HYBRID_STAGE_SEPARATOR not in piped:
        return None
    segments = piped.split(HYBRID_STAGE_SEPARATOR)
    if pp == 1 or len(segments) % pp:
        refuse(
            f"hybrid layer pattern {piped!r} in the {where} has {len(segments)} pipeline segments, not a multiple of"
            f" pipeline_model_parallel_size {pp} > 1"
        )
    vp = len(segments) // pp
    chunks = [[len(segments[v * pp + r]) for v in range(vp)] for r in range(pp)]
    stages = [sum(c) for c in chunks]
    if chunks != rank_chunks(stages, vp):
        refuse(
            f"hybrid layer pattern {piped!r} in the {where} gives the ranks model chunks {chunks}; the planner holds"
            f" {stages} layers per stage as {rank_chunks(stages, vp)}"
        )
    return stages, vp


def _model(args: Mapping[str, Any], where: str, vocab_size: int) -> dict[str, Any]:
    hybrid = _hybrid(args, where)
    model: dict[str, Any] = {
        field: _int(args, name, where) for name, field in _SHAPE.items() if name != "ffn_hidden_size"
    } | hybrid
    if args.get("ffn_hidden_size") is not None:
        model["ffn_hidden_size"] = _int(args, "ffn_hidden_size", where)
    # validate_args fills --kv-channels with hidden / heads when unset; a stated width other than that is Qwen3's.
    # Multi-latent attention ignores it: its heads are the MLA widths (ModelSpec takes head_dim = v_head_dim).
    if _on(args, "multi_latent_attention"):
        model["mla"] = _mla(args, where)
    elif args.get("kv_channels") is not None:
        model["head_dim"] = _int(args, "kv_channels", where)
    # validate_args: --num-query-groups counts only with --group-query-attention (Megatron-Core: when not None).
    if _on(args, "group_query_attention") or ("group_query_attention" not in args and args.get("num_query_groups")):
        model["num_query_groups"] = _int(args, "num_query_groups", where)
    model |= {
        "gated_mlp": _on(args, "swiglu"),
        "vocab_size": vocab_size,
        "tied_embeddings": not _on(args, "untie_embeddings_and_output_weights"),
        "linear_bias": args.get("add_bias_linear", True) is True,
        "learned_position_embeddings": args.get("position_embedding_type", "learned_absolute") == "learned_absolute",
    }
    if _on(args, "qk_layernorm") and "mla" not in model:  # under MLA it builds the latent norms, always priced
        model["qk_layernorm"] = True
    moe = _moe(args, where, model["num_layers"])
    if moe is not None:
        model["moe"] = moe
    if args.get("mtp_num_layers"):  # None or 0: no multi-token prediction
        model["mtp_num_layers"] = _int(args, "mtp_num_layers", where)
    return model


def _precision(args: Mapping[str, Any], where: str) -> str:
    """The GEMMs' format: nvfp4 (`--fp4-format`, dest fp4, with `--fp4-recipe` nvfp4, Megatron-Core's default; its
    `Fp4Recipe` enum prints as `Fp4Recipe.x`), fp8 (`--fp8-format`), else the 16-bit dtype. Layers kept in bf16
    under either (`--first-last-layers-bf16`) are read by `_bf16_end_layers`."""
    fp4, fp8 = (args.get(name) not in (None, False) for name in ("fp4", "fp8"))
    if fp4:
        recipe = str(args.get("fp4_recipe") or "nvfp4").rsplit(".", 1)[-1]
        if recipe != "nvfp4":
            refuse(f"fp4_recipe {recipe} in the {where} is not modelled (nvfp4 is)")
        return "nvfp4"
    if fp8:
        return "fp8"
    if _on(args, "fp16"):
        return "fp16"
    if _on(args, "bf16"):
        return "bf16"
    return refuse(f"neither bf16 nor fp16 is set in the {where}: fp32 training is not modelled")


def _training(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    # The launch's table read backwards (`MEGATRON_ATTENTION_BACKENDS`: flash is the flash-attn package, flash-attn 2
    # the first kernel it serves); auto (the default, and the only choice before the flag existed) leaves Transformer
    # Engine its cuDNN fused attention on Hopper.
    backend = str(args.get("attention_backend", "auto")).rsplit(".", 1)[-1]
    runtime: dict[str, bool | str] = {field: _on(args, name) for name, field in _RUNTIME.items()}
    runtime |= {
        "flash_attention": backend not in ("unfused", "local"),
        "attention_kernel": next(
            (k.value for k, b in MEGATRON_ATTENTION_BACKENDS.items() if b == backend), AttentionKernel.CUDNN.value
        ),
        "fused_kernels": args.get("transformer_impl", "transformer_engine") != "local",
        **_cuda_graphs(args),
        # Megatron-LM's default is on (--no-overlap-p2p-communication turns it off); it only acts with vp > 1.
        "overlap_p2p_comm": args.get("overlap_p2p_comm", True) is not False,
        "moe_dispatcher": _dispatcher(args, where),
        # Legacy GroupedMLP (the grouped_gemm package's one kernel per weight), else TE's GroupedLinear.
        "expert_gemm": "grouped" if _on(args, "moe_use_legacy_grouped_gemm") else "multi_stream",
    }
    training: dict[str, Any] = {
        "global_batch_size": _int(args, "global_batch_size", where),
        "precision": _precision(args, where),
        "runtime": runtime,
        "attention_dropout": float(args.get("attention_dropout", 0.1)),
        "hidden_dropout": float(args.get("hidden_dropout", 0.1)),
    }
    if isinstance(args.get("grad_reduce_in_fp32"), bool):
        training["grad_reduce_in_fp32"] = args["grad_reduce_in_fp32"]
    elif _on(args, "grad_reduce_in_bf16"):
        training["grad_reduce_in_fp32"] = False
    if training["precision"] == "fp8":
        training |= _fp8(args, where)
    if training["precision"] == "nvfp4" and isinstance(args.get("fp4_param"), bool):  # --fp4-param-gather's dest
        training["fp8_param_gather"] = args["fp4_param"]
    if training["precision"] in ("fp8", "nvfp4"):
        training |= _bf16_end_layers(args, where)
    training |= _offload(args, where) | _recompute_block(args, where)
    runtime |= _recompute_modules(args, where)
    return training


def _cuda_graphs(args: Mapping[str, Any]) -> dict[str, bool | str]:
    """CUDA graphs and what they capture (`RuntimeFeatures.cuda_graphs`, `cuda_graph_scope`): `--enable-cuda-graph`
    (before core_v0.14) or `--cuda-graph-impl` local / transformer_engine (Megatron-Bridge also writes
    full_iteration there); the whole iteration where the impl or `--cuda-graph-scope` says full_iteration."""
    impl = str(args.get("cuda_graph_impl") or "none")
    scope = args.get("cuda_graph_scope") or []
    scopes = [scope] if isinstance(scope, str) else [str(s) for s in scope]
    graphs = _on(args, "enable_cuda_graph") or impl != "none"
    full = impl == "full_iteration" or "full_iteration" in scopes
    return {"cuda_graphs": graphs, "cuda_graph_scope": "full_iteration" if graphs and full else "modules"}


def _dispatcher(args: Mapping[str, Any], where: str) -> str:
    """The MoE token dispatcher (`RuntimeFeatures.moe_dispatcher`): the flex dispatcher's backend
    (`--moe-flex-dispatcher-backend`, default deepep; `--moe-enable-deepep` before core_v0.16), else alltoall (the
    allgather dispatcher, Megatron-LM's default, is priced as it)."""
    if args.get("moe_token_dispatcher_type") != "flex":
        return "alltoall"
    backend = "deepep" if _on(args, "moe_enable_deepep") else str(args.get("moe_flex_dispatcher_backend") or "deepep")
    if backend not in ("deepep", "hybridep"):
        refuse(f"moe_flex_dispatcher_backend = {backend!r} in the {where} is not modelled (deepep, hybridep are)")
    return backend


def _offload(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Activation offloading (`--cpu-offloading-num-layers`, with which validate_args sets `cpu_offloading`; the
    Bridge config's model.cpu_offloading*): its layer count; weight offloading is not modelled."""
    layers = args.get("cpu_offloading_num_layers")
    if not _on(args, "cpu_offloading") or not layers or args.get("cpu_offloading_activations") is False:
        return {}
    if _on(args, "cpu_offloading_weights"):
        refuse(f"cpu_offloading_weights in the {where} offloads weights, which is not modelled")
    return {"activation_offload_layers": _int(args, "cpu_offloading_num_layers", where)}


def _bf16_end_layers(args: Mapping[str, Any], where: str) -> dict[str, int]:
    """The layers a quantized run keeps in BF16 (`--first-last-layers-bf16` with `--num-layers-at-start-in-bf16` /
    `--num-layers-at-end-in-bf16`, each 1 by default in Megatron-Core's TransformerConfig) as `TrainingSpec`
    states them; none without the switch."""
    if not _on(args, "first_last_layers_bf16"):
        return {}
    counts: dict[str, int] = {}
    for name, field in (
        ("num_layers_at_start_in_bf16", "bf16_layers_at_start"),
        ("num_layers_at_end_in_bf16", "bf16_layers_at_end"),
    ):
        value = args.get(name)
        value = 1 if value is None else value
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            refuse(f"{name} = {value!r} in the {where} is not a count of layers")
        counts[field] = value
    return counts


def _fp8(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The run's FP8 recipe (`--fp8-recipe`; Megatron-Core's `Fp8Recipe` enum prints as `Fp8Recipe.x`) and FP8
    weight storage (`--fp8-param-gather`, printed whether on or off), as `TrainingSpec` states them."""
    fp8: dict[str, Any] = {}
    recipe = args.get("fp8_recipe")
    if recipe is not None:
        name = str(recipe).rsplit(".", 1)[-1]
        if name not in {r.value for r in Fp8Recipe}:
            known = ", ".join(r.value for r in Fp8Recipe)
            refuse(f"fp8_recipe {name} in the {where} is not modelled ({known} are)")
        fp8["fp8_recipe"] = name
    if isinstance(args.get("fp8_param_gather"), bool):
        fp8["fp8_param_gather"] = args["fp8_param_gather"]
    return fp8


def _stages(args: Mapping[str, Any], where: str, num_layers: int, pp: int) -> list[int] | None:
    """An uneven split (`--decoder-first/last-pipeline-num-layers`): the middle stages share the rest evenly."""
    names = ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")
    if pp == 1 or all(args.get(name) is None for name in names):
        return None
    first, last = (_int(args, name, where) if args.get(name) is not None else None for name in names)
    ends = [n for n in (first, last) if n is not None]
    middle = pp - len(ends)
    rest = num_layers - sum(ends)
    if rest < middle or (middle == 0 and rest) or (middle and rest % middle):
        refuse(f"{rest} layers do not split evenly over the {middle} other pipeline stages in the {where}")
    inner = [rest // middle] * middle if middle else []
    return [*([first] if first is not None else []), *inner, *([last] if last is not None else [])]


def _layout_split(text: str, pp: int, where: str) -> tuple[list[int], int]:
    """(layers per stage, vp) of a `--pipeline-model-parallel-layout`, whose stage count over pp is vp (Megatron-LM
    validate_args); refused unless its model chunks are the planner's (`planner.rules.core.rank_chunks`)."""
    try:
        chunks = layout_chunks(text, pp)
    except ValueError as e:
        refuse(f"pipeline_model_parallel_layout {text!r} in the {where}: {e}")
    stages, vp = [sum(c) for c in chunks], len(chunks[0])
    if chunks != rank_chunks(stages, vp):
        refuse(
            f"pipeline_model_parallel_layout {text!r} in the {where} gives the ranks model chunks {chunks}; the"
            f" planner holds {stages} layers per stage as {rank_chunks(stages, vp)} (one short chunk, beside the"
            " embedding or the loss)"
        )
    return stages, vp


def _recompute(args: Mapping[str, Any]) -> str:
    granularity = args.get("recompute_granularity")
    if granularity == "full":
        return "full"
    return "selective" if granularity == "selective" else "none"


def _recompute_modules(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """What selective recompute reran (`RuntimeFeatures.recompute_modules`): `--recompute-modules`, else Megatron-Core's
    default core_attn, stated wherever it differs from the planner's own default (which adds mla_up_proj under
    MLA). Names the planner does not model (GatedDeltaNet's, hyper-connections') are refused."""
    if args.get("recompute_granularity") != "selective":
        return {}
    given = args.get("recompute_modules") or ["core_attn"]
    names = [given] if isinstance(given, str) else [str(m) for m in given]
    known = {m.value for m in RecomputeModule}
    unknown = [n for n in names if n not in known]
    if unknown:
        refuse(
            f"--recompute-modules {' '.join(unknown)} in the {where}: the planner models only"
            f" {', '.join(m.value for m in RecomputeModule)}"
        )
    if names == [RecomputeModule.CORE_ATTN.value] and not _on(args, "multi_latent_attention"):
        return {}  # the planner's default for this model
    return {"recompute_modules": names}


def _recompute_block(args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Full recompute of the first `recompute_num_layers` layers of each stage (`recompute_method` block) as
    `TrainingSpec.recompute_num_layers`; the uniform method recomputes every layer."""
    if args.get("recompute_granularity") != "full" or args.get("recompute_method") != "block":
        return {}
    return {"recompute_num_layers": _int(args, "recompute_num_layers", where)}


def _zero_stage(args: Mapping[str, Any], where: str) -> int:
    if _on(args, "use_megatron_fsdp"):
        strategy = args.get("data_parallel_sharding_strategy", "optim_grads_params")
        if strategy not in _ZERO_OF_SHARDING:
            refuse(
                f"data_parallel_sharding_strategy = {strategy!r} in the {where} is not one of {list(_ZERO_OF_SHARDING)}"
            )
        return _ZERO_OF_SHARDING[strategy]
    return 1 if _on(args, "use_distributed_optimizer") else 0


def _layout(args: Mapping[str, Any], where: str, world_size: int) -> dict[str, Any]:
    layout: dict[str, Any] = {
        field: _int(args, name, where, 1 if name not in REQUIRED else None) for name, field in _LAYOUT.items()
    }
    model_parallel = layout["tp"] * layout["pp"] * layout["cp"]
    if world_size % model_parallel:
        refuse(
            f"world size {world_size} is not a multiple of tp({layout['tp']}) * pp({layout['pp']}) * cp({layout['cp']})"
        )
    layout["dp"] = world_size // model_parallel
    layout["vp"] = args.get("virtual_pipeline_model_parallel_size") or 1
    # --expert-tensor-parallel-size: None (the default) is tp (megatron/core/parallel_state.py); stated if not.
    if (etp := _int(args, "expert_tensor_parallel_size", where, layout["tp"])) != layout["tp"]:
        layout["etp"] = etp
    text = args.get("pipeline_model_parallel_layout")
    piped = _hybrid_pattern(args)
    hybrid_split = _hybrid_split(piped, layout["pp"], where) if piped is not None else None
    if hybrid_split is not None:  # validate_args refuses the other split flags beside the pipes
        layout["layers_per_stage"], layout["vp"] = hybrid_split
    elif text:
        layout["layers_per_stage"], layout["vp"] = _layout_split(str(text), layout["pp"], where)
    elif (stages := _stages(args, where, _int(args, "num_layers", where), layout["pp"])) is not None:
        layout["layers_per_stage"] = stages
    for name in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"):
        if _on(args, name):
            layout[name] = True
    layout["recompute"] = _recompute(args)
    layout["sequence_parallel"] = _on(args, "sequence_parallel")
    layout["zero_stage"] = _zero_stage(args, where)
    return layout


def megatron_request(
    args: Mapping[str, Any], *, where: str, world_size: int, vocab_size: int, framework: str
) -> tuple[dict[str, Any], list[str]]:
    """The estimate request (less `cluster.profile`) for a run with these Megatron settings, and notes.

    `where` names what the settings came from, for the refusals ("argument dump", "task configuration").
    """
    for name in REQUIRED:
        if args.get(name) is None:
            refuse(f"{name} not in the {where}")
    notes: list[str] = []
    request = {
        "model": _model(args, where, vocab_size),
        "cluster": {"num_gpus": world_size},
        "training": _training(args, where),
        "layout": _layout(args, where, world_size),
        "framework": framework,
    }
    return request, notes
