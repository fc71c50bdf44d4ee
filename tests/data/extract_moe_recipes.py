"""Regenerate `nvidia_moe_recipes.json`: every mixture-of-experts pre-training layout in NVIDIA's performance recipes.

The file is data for `tests/api/test_moe_perf_recipes.py` (each MoE layout of NVIDIA's own NeMo / Megatron-Bridge
performance recipes, for the MoE models the planner has a shape for, is accepted by /v1/estimate and found by
/v1/plan when pinned, or is listed there with the reason it is not). Nothing here is imported by the planner. Run
it with local git mirrors of the two repositories, as `extract_perf_recipes.py` (whose refs, GPU profiles and
git helpers it shares):

    python tests/data/extract_moe_recipes.py NEMO_GIT BRIDGE_GIT

- NeMo 2: the `pre_train` rows of `scripts/performance/recommended_model_configs/model_configs_<gpu>.csv` for
  `mixtral` 8x7b / 8x22b, `deepseek` v3, `qwen3` 30b_a3b / 235b_a22b and `llama4` e16 (Scout) / e128
  (Maverick). Columns as for the dense rows, plus `ep_size`, `etp_size` (empty: Megatron's default, tp) and
  `recompute_modules` ('/'-separated, selective granularity). What the model's script and recipe add
  (`scripts/performance/llm/pretrain_<model>.py`, `nemo/collections/llm/recipes/<model>.py`): sequence
  parallelism with tp > 1 and 16-bit gradient reduction (`helpers.py`); Qwen3 235B counts the embedding and
  the loss as pipeline layers; DeepSeek-V3 trains with one multi-token-prediction layer (`use_mtp=True`), splits
  its pipeline with `num_layers_in_first/last_pipeline_stage` 64 / pp - 1 and 64 / pp - 2 (v2.3.0) or with a
  `pipeline_model_parallel_layout` chosen by (pp, vp) (v2.4.0 on), runs DeepEP on H100 (v2.4.0 on) and, at
  8cfedd7, Megatron's precision-aware optimizer with bf16 Adam moments.
- Megatron-Bridge: the `*_PRETRAIN_CONFIG_*` objects of `scripts/performance/configs/deepseek/`,
  `configs/qwen/qwen3_workload_base_configs.py`, `configs/gpt_oss/gpt_oss_workload_base_configs.py` and
  `configs/nemotronh/nemotron_3_workload_base_configs.py` (Nemotron 3 Nano, a Mamba-2 / MoE hybrid, from 26.04.01
  on, at 8,192 tokens) (`_V1` / `_V2` / `_LARGE_SCALE` from 26.02 to 26.06, `_BASE_CONFIG` at 25.11);
  `configs/<family>/*_llm_pretrain.py` and
  `src/megatron/bridge/recipes/` add: DeepSeek-V3 with one MTP layer, bf16 Adam moments, selective recompute of
  the listed modules, its (pp, vp) layout (Bridge's `set_deepseek_v3_pipeline_model_parallel_layout`, which puts
  the MTP layer beside the loss) or the config's `pp_layout` (H100, GB200; B200 always takes the (pp, vp) map);
  Qwen3 with no recompute, and 235B counting the embedding and the loss in the split; GPT-OSS 120B (its
  sliding window is the preset's) with the recipe's all-to-all dispatcher unless the config names a flex
  backend. Every row reduces gradients in bf16.

A layout is sent as `layers_per_stage` (decoder layers per pipeline rank, its model chunks summed) when the recipe
fixes the split; the planner places a rank's chunks itself (`planner.rules.core.rank_chunks`: one short chunk
beside the embedding or the loss), and a note says so where the recipe's chunks differ from that.
`recompute_modules` are sent as `training.runtime.recompute_modules` with selective recompute (left out where they
are the planner's default for the model); `not_expressed` notes every other setting the planner has no field for
(layouts it cannot express, partial CUDA-graph scopes). FP8 sub-channel scaling (`FP8_SC`) is sent as the
blockwise recipe. The token dispatcher (NeMo's DeepEP on H100, Bridge's `moe_flex_dispatcher_backend`) and
Bridge's `moe_a2a_overlap` are sent as `training.runtime.moe_dispatcher` / `moe_a2a_overlap`; 26.06's
whole-iteration graph (`cuda_graph_impl full_iteration`) as `cuda_graph_scope` full_iteration and its CuTe DSL
fused expert MLP (`cutedsl_fused_grouped_mlp`) as `expert_gemm` grouped, with a note that the fused activation is
priced apart; FP8 attention (`fp8_dot_product_attention`) is noted, not expressed. Token dropping and forced load
balancing, which the recipes set for benchmarking, make the routing uniform, as the planner assumes. Left out:
26.02.01's `..._H100_FP8_MX_*` names (aliases of the H100 configs; Transformer Engine's MXFP8 needs Blackwell, and
26.04.01 renamed them FP8_CS), the vision-language `vlm_llama4` rows, SFT / LoRA, NVFP4 configs other than
DeepSeek-V3's (`NVFP4_MODELS`), Qwen3-Next, Kimi (its recipes train with Muon, which the planner does not model)
and the GB300 / B300 / VR200 rows (no profile).
Identical rows from several releases are kept once, with every source, each source with its own `not_expressed` list
(rows sent alike may differ in what the planner cannot express).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_perf_recipes import (  # noqa: E402 (the sibling script, run from anywhere)
    BRIDGE_REFS,
    NEMO_REFS,
    PROFILES,
    _bridge_namespace,
    _csv_int,
    _resolve,
    _show,
    _WorkloadBaseConfig,
)

from planner.launch.pipeline_layout import layout_chunks  # noqa: E402 (the planner's reading of the string)
from planner.rules.core import rank_chunks  # noqa: E402 (how the planner holds a rank's chunks)

OUT = Path(__file__).with_name("nvidia_moe_recipes.json")

MODELS: dict[tuple[str, str], dict[str, Any]] = {
    ("mixtral", "8x7b"): {"preset": "mixtral-8x7b"},
    ("mixtral", "8x22b"): {"preset": "mixtral-8x22b"},
    ("deepseek", "v3"): {"preset": "deepseek-v3"},
    ("qwen3", "30b_a3b"): {"preset": "qwen3-30b-a3b"},
    ("qwen3", "235b_a22b"): {"preset": "qwen3-235b-a22b"},
    ("llama4", "e16"): {"preset": "llama4-scout"},
    ("llama4", "e128"): {"preset": "llama4-maverick"},
    ("gpt_oss", "120b"): {"preset": "gpt-oss-120b"},
    ("nemotron_3", "nano"): {"preset": "nemotron-3-nano-30b-a3b"},
}
SEQUENCE = {("nemotron_3", "nano"): 8192}
"""Tokens per sequence where a model's recipe is not at 4096 (Bridge's `nemotron_3_nano_pretrain_config`: 8192; the
others: `set_deepseek_v3_common_configs`, `set_qwen3_common_configs`, `gpt_oss_120b_pretrain_config`)."""
EMBEDDING_AND_LOSS_IN_SPLIT = {("qwen3", "235b_a22b")}
BRIDGE_FILES = (
    "scripts/performance/configs/deepseek/deepseek_workload_base_configs.py",
    "scripts/performance/configs/qwen/qwen3_workload_base_configs.py",
    "scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py",
    "scripts/performance/configs/nemotronh/nemotron_3_workload_base_configs.py",  # from 26.04.01
)
BRIDGE_MODELS = {"DEEPSEEK_V3": ("deepseek", "v3"), "QWEN3_30B_A3B": ("qwen3", "30b_a3b")}
BRIDGE_MODELS |= {"QWEN3_235B_A22B": ("qwen3", "235b_a22b"), "GPT_OSS_120B": ("gpt_oss", "120b")}
BRIDGE_MODELS |= {"NEMOTRON_3_NANO": ("nemotron_3", "nano")}
BRIDGE_PRECISIONS: dict[str, tuple[str, str | None, str | None]] = {
    "BF16": ("bf16", None, None),
    "FP8_CS": ("fp8", "tensorwise", None),
    "FP8_MX": ("fp8", "mxfp8", None),
    "FP8_SC": ("fp8", "blockwise", None),
    "NVFP4": ("nvfp4", None, None),
}
NVFP4_MODELS = {("deepseek", "v3")}
"""Models whose NVFP4 configs are kept: GPT-OSS's keep their last layers in bf16 (`num_layers_at_end_in_bf16`),
which the planner does not express."""


def _nvfp4_weights_gathered(ref: str, gpu: str) -> bool:
    """Whether a DeepSeek-V3 NVFP4 config keeps its weights as NVFP4 (`fp4_param_gather`): Bridge's
    `bf16_with_nvfp4_mixed` sets it from 26.04.01 (not in 26.02 / 26.02.01), and `deepseek_v3_pretrain_config_b200`
    turns it off again (`deepseek_llm_pretrain.py`, 26.04.01 and 26.06)."""
    return ref not in ("v0.3.0", "v0.4.0") and gpu != "B200"


def _deepseek_layout(pp: int, vp: int, mtp: bool) -> str | None:
    """DeepSeek-V3's (pp, vp) layout map: NeMo's `pretrain_deepseek_v3.py` (v2.4.0 on), Bridge's
    `set_deepseek_v3_pipeline_model_parallel_layout` (which adds `mtp` before the loss); None for (1, 1)."""
    last = ("m" if mtp else "") + "L"
    table = {
        (4, 1): f"Et*16|t*16|t*16|t*13{last}",
        (8, 1): f"Et*8|(t*8|)*6t*5{last}",
        (4, 2): f"Et*8|(t*8|)*6t*5{last}",
        (16, 1): f"Et*4|(t*4|)*14t{last}",
        (8, 2): f"Et*4|(t*4|)*14t{last}",
        (4, 4): f"Et*4|(t*4|)*14t{last}",
    }
    return table.get((pp, vp))


def _per_rank(layout: str, pp: int, vp: int) -> list[int]:
    """Decoder layers per pipeline rank (its model chunks summed)."""
    chunks = layout_chunks(layout, pp)
    assert all(len(c) == vp for c in chunks), (layout, pp, vp)
    return [sum(c) for c in chunks]


def _recompute(modules: list[str] | None, key: tuple[str, str]) -> tuple[str, list[str] | None]:
    """The planner's recompute mode and `training.runtime.recompute_modules` for a recipe's module list (selective
    granularity); the list is left out where it is the planner's default for the model (core_attn, and with
    DeepSeek-V3's multi-latent attention also mla_up_proj)."""
    if not modules:
        return "none", None
    default = ["core_attn", "mla_up_proj"] if key == ("deepseek", "v3") else ["core_attn"]
    return "selective", None if sorted(modules) == sorted(default) else modules


def _request(
    key: tuple[str, str],
    gpu: str,
    precision: str,
    fp8_recipe: str | None,
    seq: int,
    num_gpus: int,
    par: dict[str, Any],
    gbs: int,
    recompute: str,
    cuda_graphs: bool,
    adam_bf16: bool,
    layers_per_stage: list[int] | None,
    dispatcher: str | None = None,
    a2a_overlap: bool = False,
    recompute_modules: list[str] | None = None,
    full_iteration_graph: bool = False,
    grouped_experts: bool = False,
) -> dict[str, Any]:
    tp, pp, cp = par["tp"], par["pp"], par["cp"]
    layout: dict[str, Any] = {
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "dp": num_gpus // (tp * pp * cp),
        "ep": par["ep"],
        "etp": par["etp"] if par["etp"] is not None else tp,  # Megatron: expert_tensor_parallel_size None = tp
        "vp": par["vp"],
        "micro_batch_size": par["mbs"],
        "sequence_parallel": tp > 1,
        "recompute": recompute,
        "zero_stage": 1,
    }
    if key in EMBEDDING_AND_LOSS_IN_SPLIT:
        layout |= {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}
    if layers_per_stage is not None:
        layout["layers_per_stage"] = layers_per_stage
    training: dict[str, Any] = {"global_batch_size": gbs, "precision": precision, "grad_reduce_in_fp32": False}
    if fp8_recipe:
        training["fp8_recipe"] = fp8_recipe
    if adam_bf16:
        training["adam_moments"] = "bf16"
    runtime: dict[str, Any] = {"cuda_graphs": True} if cuda_graphs else {}
    if dispatcher:
        runtime["moe_dispatcher"] = dispatcher
    if a2a_overlap:
        runtime["moe_a2a_overlap"] = True
    if recompute_modules:
        runtime["recompute_modules"] = recompute_modules
    if full_iteration_graph:
        runtime["cuda_graph_scope"] = "full_iteration"
    if grouped_experts:
        runtime["expert_gemm"] = "grouped"
    if runtime:
        training["runtime"] = runtime
    return {
        "model": MODELS[key] | {"seq_length": seq},
        "cluster": {"profile": PROFILES[gpu], "num_gpus": num_gpus, "memory_headroom": 0.0},
        "training": training,
        "layout": layout,
    }


def _layout_fields(layout: str | None, pp: int, vp: int, origin: str) -> tuple[list[int] | None, str | None]:
    """`layers_per_stage` for a fixed layout, and the note when its chunks are uneven under interleaving."""
    if layout is None:
        return None, None
    stages = _per_rank(layout, pp, vp)
    if layout_chunks(layout, pp) != rank_chunks(stages, vp):
        return stages, (
            f"{origin} {layout!r}: model chunks {layout_chunks(layout, pp)} per rank, which the planner holds as"
            f" {rank_chunks(stages, vp)} (planner.rules.core.rank_chunks)"
        )
    return stages, None


def nemo_rows(git_dir: str) -> list[tuple[dict[str, Any], str, list[str]]]:
    out = []
    for ref in NEMO_REFS:
        commit = _resolve(git_dir, ref)
        for gpu in PROFILES:
            path = f"scripts/performance/recommended_model_configs/model_configs_{gpu}.csv"
            for r in csv.DictReader(io.StringIO(_show(git_dir, ref, path))):
                key = (r["model"], r["size"])
                if r["task"] != "pre_train" or key not in MODELS or r["system"] not in PROFILES:
                    continue

                def num(name: str, row: dict[str, str] = r) -> int:
                    return _csv_int(row, name)

                assert not (num("recompute_layers") or num("activation_offload_layers") or num("use_mcore_fsdp"))
                etp = num("etp_size") or None
                par = {"tp": num("tp_size"), "pp": num("pp_size"), "cp": num("cp_size"), "ep": num("ep_size")}
                par |= {"etp": etp, "vp": num("vp_size") or 1, "mbs": num("mbs")}
                modules = [m for m in (r.get("recompute_modules") or "").strip().split("/") if m]
                recompute, recompute_modules = _recompute(modules, key)
                notes: list[str] = []
                layers_per_stage = None
                adam_bf16 = False
                dispatcher = None
                if key == ("deepseek", "v3"):
                    pp, vp = par["pp"], par["vp"]
                    # one MTP layer (use_mtp=True): the deepseek-v3 preset's mtp_num_layers 1
                    if ref == "v2.3.0":  # num_layers_in_first/last_pipeline_stage = 64 / pp - 1, 64 / pp - 2
                        middle = 64 // pp
                        layers_per_stage = [middle - 1] + [middle] * (pp - 2) + [middle - 2] if pp > 1 else None
                    else:
                        layout = _deepseek_layout(pp, vp, mtp=False)
                        layers_per_stage, note = _layout_fields(layout, pp, vp, "pipeline_model_parallel_layout")
                        notes += [note] if note else []
                        if gpu == "h100":  # moe_token_dispatcher_type flex, moe_enable_deepep
                            dispatcher = "deepep"
                    adam_bf16 = ref == NEMO_REFS[-1]  # 8cfedd7: use_precision_aware_optimizer, bf16 exp_avg(_sq)
                row = _request(
                    key,
                    r["system"],
                    r["dtype"],
                    "delayed" if r["dtype"] == "fp8" else None,
                    num("seq_len"),
                    num("num_gpus"),
                    par,
                    num("gbs"),
                    recompute,
                    bool(num("cuda_graphs")),
                    adam_bf16,
                    layers_per_stage,
                    dispatcher,
                    recompute_modules=recompute_modules,
                )
                columns = "tp pp cp ep vp mbs gbs etp".split()
                values = [r[c if c in ("mbs", "gbs") else f"{c}_size"] or "-" for c in columns]
                row_text = " ".join(f"{c}={v.removesuffix('.0')}" for c, v in zip(columns, values, strict=True))
                source = (
                    f"NVIDIA/NeMo@{commit[:10]} ({ref}) {path}: {r['model']} {r['size']} {r['dtype']}"
                    f" {r['num_gpus'].removesuffix('.0')} GPUs {row_text}"
                    + (f" recompute_modules={'/'.join(modules)}" if modules else "")
                )
                out.append((row, source, notes))
    return out


def bridge_rows(git_dir: str) -> list[tuple[dict[str, Any], str, list[str]]]:
    out = []
    for ref, release in BRIDGE_REFS:
        commit = _resolve(git_dir, ref)
        for path in BRIDGE_FILES:
            for name, cfg in _bridge_namespace(git_dir, ref, path).items():
                if not isinstance(cfg, _WorkloadBaseConfig) or "_PRETRAIN_CONFIG_" not in name or cfg.peft:
                    continue
                model_key, rest = name.split("_PRETRAIN_CONFIG_")
                gpu, _, tail = rest.partition("_")
                precision_key = re.sub(r"_(V\d+|BASE_CONFIG|LARGE_SCALE)$", "", tail)
                if (
                    model_key not in BRIDGE_MODELS
                    or precision_key not in BRIDGE_PRECISIONS
                    or gpu.lower() not in PROFILES
                    or (gpu == "H100" and precision_key == "FP8_MX")  # a name only: Hopper has no MXFP8
                ):
                    continue
                key = BRIDGE_MODELS[model_key]
                if precision_key == "NVFP4" and key not in NVFP4_MODELS:
                    continue
                precision, fp8_recipe, precision_note = BRIDGE_PRECISIONS[precision_key]
                pp, vp = cfg.pipeline_model_parallel_size, cfg.virtual_pipeline_model_parallel_size or 1
                par = {"tp": cfg.tensor_model_parallel_size, "pp": pp, "cp": cfg.context_parallel_size}
                par |= {"ep": cfg.expert_model_parallel_size, "etp": cfg.expert_tensor_parallel_size}
                par |= {"vp": vp, "mbs": cfg.micro_batch_size}
                assert not (cfg.recompute_num_layers or cfg.cpu_offloading_num_layers or cfg.use_megatron_fsdp)
                notes = [precision_note] if precision_note else []
                layers_per_stage = None
                if key == ("deepseek", "v3"):
                    # granularity selective: Megatron-Core's default list is core_attn alone
                    recompute, recompute_modules = _recompute(cfg.recompute_modules or ["core_attn"], key)
                    own = cfg.pp_layout if gpu != "B200" else None  # B200 takes the (pp, vp) map
                    if ref == BRIDGE_REFS[0][0] and gpu == "H100":
                        own = "Et|(tt|)*30mL"  # 25.11's deepseek_v3_pretrain_config_h100 passes this layout
                    layout = own or _deepseek_layout(pp, vp, mtp=True)
                    origin = "pipeline_model_parallel_layout" if own else "(pp, vp) pipeline_model_parallel_layout"
                    layers_per_stage, note = _layout_fields(layout, pp, vp, origin)
                    notes += [note] if note else []
                else:
                    recompute, recompute_modules = _recompute(cfg.recompute_modules, key)
                graphs = cfg.cuda_graph_impl not in (None, "none")
                scope = list(cfg.cuda_graph_scope or [])
                # 26.06 names Megatron-Core's whole-iteration graph `full_iteration` (earlier: impl local, scope
                # full_iteration); Transformer Engine's per-module graphs list their modules
                full_iteration = cfg.cuda_graph_impl == "full_iteration" or "full_iteration" in scope
                if graphs and scope and not full_iteration:
                    notes.append(
                        f"cuda_graph_impl {cfg.cuda_graph_impl} with cuda_graph_scope {scope}:"
                        " sent as cuda_graphs (whole layers captured)"
                    )
                if cfg.cutedsl_fused_grouped_mlp:
                    notes.append(
                        "cutedsl_fused_grouped_mlp (one CuTe DSL kernel for the experts' fc1, activation and fc2):"
                        " sent as expert_gemm grouped, the activation priced as its own kernel"
                    )
                if cfg.fp8_dot_product_attention:
                    notes.append("fp8_dot_product_attention: the attention core is priced in bf16")
                row = _request(
                    key,
                    gpu.lower(),
                    precision,
                    fp8_recipe,
                    SEQUENCE.get(key, 4096),
                    cfg.num_gpus,
                    par,
                    cfg.global_batch_size,
                    recompute,
                    graphs,
                    key == ("deepseek", "v3"),  # the DeepSeek-V3 recipe's precision-aware optimizer, bf16 moments
                    layers_per_stage,
                    cfg.moe_flex_dispatcher_backend,  # the flex dispatcher over this backend
                    bool(cfg.moe_a2a_overlap),  # overlap_moe_expert_parallel_comm (with delay_wgrad_compute)
                    recompute_modules,
                    graphs and full_iteration,
                    bool(cfg.cutedsl_fused_grouped_mlp),
                )
                if precision == "nvfp4" and not _nvfp4_weights_gathered(ref, gpu):
                    row["training"]["fp8_param_gather"] = False
                out.append((row, f"NVIDIA-NeMo/Megatron-Bridge@{commit[:10]} ({release}) {path}: {name}", notes))
    return out


def main(nemo_git: str, bridge_git: str) -> None:
    merged: dict[str, dict[str, Any]] = {}
    for row, source, notes in nemo_rows(nemo_git) + bridge_rows(bridge_git):
        entry = merged.setdefault(json.dumps(row, sort_keys=True), {"request": row, "sources": []})
        entry["sources"].append({"source": source, "not_expressed": notes})
    rows = sorted(merged.values(), key=lambda r: json.dumps(r["request"], sort_keys=True))
    OUT.write_text(json.dumps({"about": __doc__.split("\n\n")[0], "recipes": rows}, indent=1) + "\n")
    print(f"{len(rows)} distinct layouts written to {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
