"""The plans the real-code checks run through the frameworks' own code: the ranked plans and baselines of real
searches (dense, GQA, MoE with EP, CP, interleaved, uneven, every ZeRO stage and recompute mode, fp16/bf16/fp8,
partial nodes, NVL72, a hybrid Mamba model) plus the hand-made cases of conftest.py. Shared by
test_framework_check.py (Megatron-Core, TorchTitan 0.2.2) and test_torchtitan03_check.py (TorchTitan 0.3.0), which
run in different environments.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from planner.launch import LaunchArgs, launch_args
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.rules import rule_set
from planner.search.plan import plan
from planner.specs import ModelSpec, Precision, TrainingSpec
from tests.launch.conftest import CASES


@dataclass(frozen=True)
class Planned:
    id: str
    model: ModelSpec
    training: TrainingSpec
    layout: Layout
    num_gpus: int
    gpus_per_node: int
    nvlink_domain_gpus: int
    num_microbatches: int | None
    versions: tuple[tuple[str, str], ...] = ()
    """framework -> release for the launch (the others: their newest targeted)."""

    @property
    def launch(self) -> LaunchArgs:
        return _launch(self)


@cache
def _launch(p: Planned) -> LaunchArgs:
    return launch_args(p.model, p.training, p.layout, p.num_gpus, p.gpus_per_node, None, dict(p.versions))


# (preset, profile, GPUs, global batch, precision, constraints)
SEARCHES: list[tuple[str, str, int, int, Precision, dict[str, Any]]] = [
    ("llama3-8b", "dgx-h100", 64, 512, Precision.BF16, {}),
    ("llama3-8b", "dgx-h100", 100, 400, Precision.BF16, {}),
    ("llama3-8b", "dgx-h100", 12, 96, Precision.FP8, {}),
    ("llama3-8b", "dgx-a100-80gb", 64, 512, Precision.FP16, {"zero_stage": [0, 1]}),
    ("llama3-70b", "dgx-h100", 512, 1024, Precision.BF16, {"vp": [2, 4, 5]}),
    ("llama3-70b", "dgx-h100", 100, 1000, Precision.BF16, {}),
    ("llama3-70b", "dgx-h100", 256, 512, Precision.BF16, {"cp": [2, 4]}),
    ("llama3-70b", "gb200-nvl72", 144, 1152, Precision.BF16, {}),
    ("llama3-70b", "gb200-nvl72", 72, 576, Precision.FP8, {"recompute": "selective"}),
    ("llama3-405b", "dgx-h100", 1024, 2048, Precision.BF16, {"zero_stage": [2, 3], "pp": 1}),
    ("llama3-405b", "dgx-h100", 1024, 2048, Precision.BF16, {"recompute": "full"}),
    ("gpt3-175b", "dgx-a100-80gb", 1024, 1536, Precision.FP16, {}),
    ("gpt3-175b", "dgx-a100-80gb", 1000, 1500, Precision.BF16, {}),
    ("mixtral-8x7b", "dgx-h100", 256, 512, Precision.BF16, {"ep": [2, 4, 8]}),
    ("mixtral-8x7b", "dgx-h100", 64, 256, Precision.FP8, {}),
    ("deepseek-v3", "dgx-h100", 1024, 2048, Precision.BF16, {"ep": [8, 16, 32, 64]}),
    ("llama4-scout", "dgx-h100", 64, 256, Precision.BF16, {"ep": [8, 16]}),
    ("qwen3-30b-a3b", "dgx-h100", 16, 256, Precision.BF16, {"ep": [8, 16]}),
    ("nemotron4-15b", "hgx-h200", 64, 256, Precision.BF16, {"recompute": "none"}),
    ("nemotron-h-8b", "dgx-h100", 64, 512, Precision.BF16, {"tp": [1, 2, 4], "pp": [1, 2]}),
    ("gpt-neox-20b", "dgx-a100-40gb", 96, 384, Precision.BF16, {}),
    ("bloom-176b", "dgx-a100-80gb", 384, 2048, Precision.BF16, {}),
    ("megatron-1.7b", "dgx-a100-80gb", 40, 320, Precision.FP16, {}),
]


def planned(
    framework: str, release: str, searches: list[tuple[str, str, int, int, Precision, dict[str, Any]]] = SEARCHES
) -> list[Planned]:
    """The searches' plans under `framework`'s rules at `release` (launched at that release), then the cases."""
    profiles = load_profiles()
    rules = rule_set(framework, release)
    versions = ((framework, release),)
    out: list[Planned] = []
    for preset, profile_id, gpus, batch, precision, constraints in searches:
        model, profile = get_preset(preset).model, profiles[profile_id]
        training = TrainingSpec(global_batch_size=batch, precision=precision)
        result = plan(model, ClusterSpec(profile=profile, num_gpus=gpus), training, constraints, 8, rules=rules)
        baselines = (result.baseline, result.modern_baseline)
        plans = [*result.plans] + [b.plan for b in baselines if b is not None and b.plan is not None]
        node, domain = profile.node.gpus_per_node, profile.node.nvlink_domain_gpus
        for i, p in enumerate(plans):
            e = p.estimate
            pid = f"{preset}-{profile_id}-{gpus}-{precision.value}-{i}"
            out.append(Planned(pid, model, training, p.layout, p.num_gpus, node, domain, e.num_microbatches, versions))
    for c in CASES:
        out.append(
            Planned(c.id, c.model, c.training, c.layout, c.num_gpus, c.gpus_per_node, c.gpus_per_node, None, versions)
        )
    return out


def microbatches(p: Planned) -> int:
    """Micro-batches per step per data-parallel rank, as planned."""
    n = p.training.global_batch_size // (p.layout.micro_batch_size * p.layout.dp)
    assert p.num_microbatches in (None, n)
    return n
