"""Regenerate `nvidia_perf_recipes.json`: every dense pre-training layout in NVIDIA's performance recipes.

The file is data for `tests/api/test_perf_recipes.py` (issue 10: every dense layout in NVIDIA's own NeMo /
Megatron-Bridge performance recipes must be accepted by /v1/estimate and found by /v1/plan when pinned).
Nothing here is imported by the planner. Run it with local git mirrors of the two repositories:

    python tests/data/extract_perf_recipes.py NEMO_GIT BRIDGE_GIT

Each argument is a git directory (bare or not); the refs read are `NEMO_REFS` and `BRIDGE_REFS` below.

- NeMo 2 lists its recipes as CSV tables, one per GPU
  (`scripts/performance/recommended_model_configs/model_configs_<gpu>.csv`: GPUs, sequence, tp, pp, cp, ep,
  vp, micro and global batch, CUDA graphs, Megatron-FSDP, block-recompute layers, offloaded layers).
  `scripts/performance/helpers.py` says what the columns set: `recompute_layers` > 0 is full recompute with
  `recompute_method` block, `use_mcore_fsdp` is Megatron-FSDP `optim_grads_params` (ZeRO-3), and every run
  reduces gradients in bf16 (`set_precision_configs`: `grad_reduce_in_fp32 = False`); fp8 without a stated
  recipe is delayed scaling ("ds").
- Megatron-Bridge lists them as `WorkloadBaseConfig` objects in
  `scripts/performance/configs/llama/llama3*_workload_base_configs.py` and
  `configs/nemotronh/nemotronh_workload_base_configs.py`; the names say GPU and precision
  (`..._H100_FP8_CS_V1`; 25.11 `..._H100_FP8_CS_BASE_CONFIG`). The modules are run with a stand-in for
  the one class they import.

Kept: pre-training rows of dense models the planner has a shape for (GPT-3 175B, Llama 3 8B / 70B,
Llama 3.1 405B, Nemotron-3 8B / 22B, Nemotron-4 15B / 340B, and the dense Mamba-2 hybrids Nemotron-H 8B /
47B / 56B) on GPUs it has a profile for (H100, B200, GB200). A hybrid's per-module CUDA graphs
(`cuda_graph_scope` mamba, attn) are sent as `cuda_graphs`. Left out, and why: MoE models (DeepSeek,
Mixtral, Qwen3, Llama 4, GPT-OSS, and the MoE hybrid Nemotron 3 Nano: `extract_moe_recipes.py`), LoRA /
SFT and the GB300 / B300 rows (no profile). Bridge's NVFP4 configs are kept as precision nvfp4 (their
`bf16_with_nvfp4_mixed` keeps every transformer layer in NVFP4). Identical rows from several releases are kept
once, with every source.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

NEMO_REFS = ("v2.3.0", "v2.4.0", "8cfedd7203462cb251a914e700e5605444277561")
BRIDGE_REFS = (
    ("5776a6d", "NeMo 25.11 (Megatron-Bridge perf configs)"),
    ("v0.3.0", "NeMo 26.02 (Megatron-Bridge 0.3.0 perf configs)"),
    ("v0.4.0", "NeMo 26.02.01 (Megatron-Bridge 0.4.0 perf configs)"),
    ("17a381f", "NeMo 26.04.01 (Megatron-Bridge perf configs)"),
    ("v0.5.0", "NeMo 26.06 (Megatron-Bridge 0.5.0 perf configs)"),
)
OUT = Path(__file__).with_name("nvidia_perf_recipes.json")

PROFILES = {"h100": "dgx-h100", "b200": "hgx-b200", "gb200": "gb200-nvl72"}
PRESETS = {
    ("gpt3", "175b"): "gpt3-175b",
    ("llama3", "8b"): "llama3-8b",
    ("llama3", "70b"): "llama3-70b",
    ("llama31", "405b"): "llama3-405b",
    ("nemotron4", "15b"): "nemotron4-15b",
    ("nemotron4", "340b"): "nemotron4-340b",
    ("nemotronh", "8b"): "nemotron-h-8b",
    ("nemotronh", "56b"): "nemotron-h-56b",
}
NEMOTRON_H_47B = {
    # NeMo nemo/collections/llm/gpt/model/ssm.py NemotronHConfig47B over NemotronHConfigBase (8cfedd7): 98 layers
    # in the pattern below, squared-ReLU MLP of 30720, 64 query heads in 8 groups, Mamba-2 state 256 with 8 B/C
    # groups of heads of 64 (d_inner 2 x hidden, so 256 heads), vocabulary 131072, no position embedding.
    "name": "Nemotron-H 47B",
    "num_layers": 98,
    "hidden_size": 8192,
    "num_attention_heads": 64,
    "num_query_groups": 8,
    "head_dim": 128,
    "ffn_hidden_size": 30720,
    "gated_mlp": False,
    "vocab_size": 131072,
    "tied_embeddings": False,
    "linear_bias": False,
    "learned_position_embeddings": False,
    "hybrid_pattern": (
        "M-M-M-M-M-M-M-M-M*-M-M-M-M-M-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-M-M---MM---M-M*-M-M-M-M-M-"
    ),
    "mamba": {"state_dim": 256, "head_dim": 64, "num_groups": 8, "num_heads": 256, "conv_kernel": 4},
}
NEMOTRON3 = {
    # NeMo nemo/collections/llm/gpt/model/nemotron.py Nemotron3Config8B / Nemotron3Config22B (v2.4.0): squared
    # ReLU, no bias, untied, RoPE, multi-head attention (num_query_groups None); vocabulary 256000 (the
    # Nemotron tokenizer, as Nemotron-4).
    "8b": {"num_layers": 32, "hidden_size": 4096, "ffn_hidden_size": 16384, "num_attention_heads": 32},
    "22b": {"num_layers": 40, "hidden_size": 6144, "ffn_hidden_size": 24576, "num_attention_heads": 48},
}
BRIDGE_MODELS = {"LLAMA3_8B": ("llama3", "8b", 8192), "LLAMA3_70B": ("llama3", "70b", 8192)}
BRIDGE_MODELS |= {"LLAMA31_405B": ("llama31", "405b", 8192), "NEMOTRONH_56B": ("nemotronh", "56b", 8192)}
BRIDGE_FILES = (
    "scripts/performance/configs/llama/llama3_workload_base_configs.py",
    "scripts/performance/configs/llama/llama31_workload_base_configs.py",
    "scripts/performance/configs/nemotronh/nemotronh_workload_base_configs.py",
)
BRIDGE_PRECISIONS = {"BF16": ("bf16", None), "FP8_CS": ("fp8", "tensorwise"), "FP8_MX": ("fp8", "mxfp8")}
BRIDGE_PRECISIONS |= {"FP8_DS": ("fp8", "delayed"), "NVFP4": ("nvfp4", None)}


def _show(git_dir: str, ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{ref}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def _exists(git_dir: str, ref: str, path: str) -> bool:
    """Whether `path` is in the tree at `ref`."""
    done = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "-e", f"{ref}:{path}"], capture_output=True)
    return done.returncode == 0


def _resolve(git_dir: str, ref: str) -> str:
    out = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", ref], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def _csv_int(row: dict[str, str], key: str) -> int:
    """A recipe table's cell as an integer: empty or absent is 0; "4.0" is 4."""
    return int(float(row.get(key) or "0"))


def _bridge_namespace(git_dir: str, ref: str, path: str) -> dict[str, Any]:
    """The globals of one Bridge workload-config module at `ref`, run with `_WorkloadBaseConfig` standing in for
    the one class it imports; none where the release has no such module (a model's recipes join later)."""
    if not _exists(git_dir, ref, path):
        return {}
    stub = types.ModuleType("utils.utils")
    stub.WorkloadBaseConfig = _WorkloadBaseConfig  # type: ignore[attr-defined]
    sys.modules["utils"] = types.ModuleType("utils")
    sys.modules["utils.utils"] = stub
    namespace: dict[str, Any] = {}
    exec(compile(_show(git_dir, ref, path), path, "exec"), namespace)  # noqa: S102 (pinned source, data only)
    return namespace


def _model(family: str, size: str, seq: int) -> dict[str, Any] | None:
    if (family, size) in PRESETS:
        return {"preset": PRESETS[(family, size)], "seq_length": seq}
    if (family, size) == ("nemotronh", "47b"):
        return NEMOTRON_H_47B | {"seq_length": seq}
    if family == "nemotron3" and size in NEMOTRON3:
        shape = NEMOTRON3[size]
        return {
            "name": f"Nemotron-3 {size.upper()}",
            **shape,
            "num_query_groups": shape["num_attention_heads"],
            "gated_mlp": False,
            "vocab_size": 256000,
            "seq_length": seq,
            "tied_embeddings": False,
            "linear_bias": False,
            "learned_position_embeddings": False,
        }
    return None


def _row(
    family: str,
    size: str,
    gpu: str,
    precision: str,
    fp8_recipe: str | None,
    seq: int,
    num_gpus: int,
    par: dict[str, int],
    gbs: int,
    recompute_layers: int,
    offload_layers: int,
    fsdp: bool,
    cuda_graphs: bool,
) -> dict[str, Any] | None:
    model = _model(family, size, seq)
    if model is None or gpu not in PROFILES:
        return None
    tp, pp, cp, vp = par["tp"], par["pp"], par["cp"], par["vp"]
    layout: dict[str, Any] = {
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "dp": num_gpus // (tp * pp * cp),
        "vp": vp,
        "micro_batch_size": par["mbs"],
        "sequence_parallel": tp > 1,
        "recompute": "full" if recompute_layers else "none",
        "zero_stage": 3 if fsdp else 1,
    }
    if family == "llama31":  # both recipes set account_for_{embedding,loss}_in_pipeline_split
        layout |= {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}
    training: dict[str, Any] = {"global_batch_size": gbs, "precision": precision, "grad_reduce_in_fp32": False}
    if fp8_recipe:
        training["fp8_recipe"] = fp8_recipe
    if recompute_layers:
        training["recompute_num_layers"] = recompute_layers
    if offload_layers:
        training["activation_offload_layers"] = offload_layers
    if cuda_graphs:
        training["runtime"] = {"cuda_graphs": True}
    return {
        "model": model,
        "cluster": {"profile": PROFILES[gpu], "num_gpus": num_gpus, "memory_headroom": 0.0},
        "training": training,
        "layout": layout,
    }


def nemo_rows(git_dir: str) -> list[tuple[dict[str, Any], str]]:
    out = []
    for ref in NEMO_REFS:
        commit = _resolve(git_dir, ref)
        for gpu in PROFILES:
            path = f"scripts/performance/recommended_model_configs/model_configs_{gpu}.csv"
            for r in csv.DictReader(io.StringIO(_show(git_dir, ref, path))):
                if r["task"] != "pre_train":
                    continue

                def num(key: str, row: dict[str, str] = r) -> int:
                    return _csv_int(row, key)

                par = {"tp": num("tp_size"), "pp": num("pp_size"), "cp": num("cp_size"), "vp": num("vp_size") or 1}
                par["mbs"] = num("mbs")
                if num("ep_size") > 1 or (r.get("recompute_modules") or "").strip():
                    continue
                row = _row(
                    r["model"],
                    r["size"],
                    r["system"],
                    r["dtype"],
                    "delayed" if r["dtype"] == "fp8" else None,
                    num("seq_len"),
                    num("num_gpus"),
                    par,
                    num("gbs"),
                    num("recompute_layers"),
                    num("activation_offload_layers"),
                    bool(num("use_mcore_fsdp")),
                    bool(num("cuda_graphs")),
                )
                if row is not None:
                    source = f"NVIDIA/NeMo@{commit[:10]} ({ref}) {path}: {r['model']} {r['size']} {r['dtype']}"
                    out.append((row, source))
    return out


@dataclasses.dataclass
class _WorkloadBaseConfig:
    """Stand-in for Bridge's `utils.utils.WorkloadBaseConfig`: the fields its Llama, Nemotron, Qwen3, DeepSeek and
    GPT-OSS modules set (26.06 adds `cutedsl_fused_grouped_mlp` and `fp8_dot_product_attention`)."""

    num_gpus: int = 1
    tensor_model_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1
    context_parallel_size: int = 1
    virtual_pipeline_model_parallel_size: int | None = None
    expert_model_parallel_size: int = 1
    expert_tensor_parallel_size: int | None = None
    global_batch_size: int = 1
    micro_batch_size: int = 1
    use_megatron_fsdp: bool | None = None
    nccl_ub: bool | None = None
    cuda_graph_impl: str | None = None
    cuda_graph_scope: Any = None
    cpu_offloading_num_layers: int | None = None
    recompute_num_layers: int | None = None
    recompute_modules: list[str] | None = None
    moe_flex_dispatcher_backend: str | None = None
    moe_a2a_overlap: bool | None = False
    cutedsl_fused_grouped_mlp: bool | None = False
    fp8_dot_product_attention: bool | None = None
    peft: str | None = None
    pp_layout: str | None = None
    te_precision_config_file: str | None = None


def bridge_rows(git_dir: str) -> list[tuple[dict[str, Any], str]]:
    out = []
    for ref, release in BRIDGE_REFS:
        commit = _resolve(git_dir, ref)
        for path in BRIDGE_FILES:
            namespace = _bridge_namespace(git_dir, ref, path)
            for key, cfg in namespace.items():
                if not isinstance(cfg, _WorkloadBaseConfig) or "_PRETRAIN_CONFIG_" not in key:
                    continue
                model_key, rest = key.split("_PRETRAIN_CONFIG_")
                gpu, _, tail = rest.partition("_")
                precision_key = re.sub(r"_(V\d+|BASE_CONFIG)$", "", tail)  # 26.04: `_V1`; 25.11: `_BASE_CONFIG`
                if model_key not in BRIDGE_MODELS or precision_key not in BRIDGE_PRECISIONS or cfg.peft:
                    continue
                family, size, seq = BRIDGE_MODELS[model_key]
                precision, fp8_recipe = BRIDGE_PRECISIONS[precision_key]
                par = {
                    "tp": cfg.tensor_model_parallel_size,
                    "pp": cfg.pipeline_model_parallel_size,
                    "cp": cfg.context_parallel_size,
                    "vp": cfg.virtual_pipeline_model_parallel_size or 1,
                    "mbs": cfg.micro_batch_size,
                }
                row = _row(
                    family,
                    size,
                    gpu.lower(),
                    precision,
                    fp8_recipe,
                    seq,
                    cfg.num_gpus,
                    par,
                    cfg.global_batch_size,
                    cfg.recompute_num_layers or 0,
                    cfg.cpu_offloading_num_layers or 0,
                    bool(cfg.use_megatron_fsdp),
                    cfg.cuda_graph_impl not in (None, "none"),
                )
                if row is not None:
                    out.append((row, f"NVIDIA-NeMo/Megatron-Bridge@{commit[:10]} ({release}) {path}: {key}"))
    return out


def main(nemo_git: str, bridge_git: str) -> None:
    merged: dict[str, dict[str, Any]] = {}
    for row, source in nemo_rows(nemo_git) + bridge_rows(bridge_git):
        key = json.dumps(row, sort_keys=True)
        merged.setdefault(key, {"request": row, "sources": []})["sources"].append(source)
    rows = sorted(merged.values(), key=lambda r: json.dumps(r["request"], sort_keys=True))
    OUT.write_text(json.dumps({"about": __doc__.split("\n\n")[0], "recipes": rows}, indent=1) + "\n")
    print(f"{len(rows)} distinct layouts written to {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
