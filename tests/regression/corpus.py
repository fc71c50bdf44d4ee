"""A fixed corpus of plan and estimate requests whose responses pin the planner's behaviour.

`python tests/regression/record.py` writes every response to `responses.json`;
`test_regression.py` replays the corpus and compares (numbers to 1e-12
relative). A deliberate physics change re-records the file in the same commit,
so the diff shows every number it moved.

The corpus is built from a seeded generator, not hand-picked: every preset and
every hardware profile appears in the plans, with constraints, both
objectives and the three precisions; estimates are random layouts on random
GPU counts, legal or not (a broken rule shows in `violations`).
"""

from __future__ import annotations

import random
from typing import Any

from planner.presets import load_presets
from planner.profiles import load_profiles

__all__ = ["estimate_requests", "plan_requests"]

Request = dict[str, Any]

_SMALL = {"megatron-1.7b", "megatron-3.6b", "megatron-7.5b", "llama3-8b", "nemotron4-15b", "gpt-neox-20b"}
_MEDIUM = {"megatron-18.4b", "megatron-39.1b", "megatron-76.1b", "llama3-70b", "mixtral-8x7b", "qwen3-30b-a3b"}


def _gpus_for(preset: str, rng: random.Random) -> int:
    if preset in _SMALL:
        return rng.choice([8, 16, 32, 64])
    if preset in _MEDIUM:
        return rng.choice([64, 128, 256])
    return rng.choice([512, 1024, 2048])


def _batch_for(num_gpus: int, rng: random.Random) -> int:
    return rng.choice([256, 512, 1024, 1536, 2048]) if num_gpus >= 256 else rng.choice([64, 128, 256, 512])


_CONSTRAINTS: list[dict[str, Any]] = [
    {},
    {},
    {"tp": 8},
    {"recompute": ["selective", "full"]},
    {"zero_stage": [0, 1]},
    {"pp": [1, 2, 4]},
    {"sequence_parallel": True},
    {"vp": 1, "micro_batch_size": [1, 2]},
]


def _precisions(profile: str) -> list[str]:
    """The precisions drawn for a profile (the A100 has no FP8 tensor cores: a request for it is a 422)."""
    return ["bf16", "bf16", "fp16"] + ([] if "a100" in profile else ["fp8"])


_EXPLICIT_SHAPE = {
    "num_layers": 24,
    "hidden_size": 3072,
    "num_attention_heads": 24,
    "num_query_groups": 8,
    "ffn_hidden_size": 8192,
    "gated_mlp": True,
    "vocab_size": 128256,
    "seq_length": 4096,
}

_FIXED_PLANS: list[Request] = [
    # Nothing fits: the answer is a diagnosis.
    {
        "model": {"preset": "llama3-405b"},
        "cluster": {"profile": "dgx-a100-40gb", "num_gpus": 64},
        "training": {"global_batch_size": 512},
    },
    # An explicit shape, and a profile with overrides.
    {
        "model": _EXPLICIT_SHAPE,
        "cluster": {"profile": "dgx-h100", "num_gpus": 32, "overrides": {"network": {"nics_per_node": 4}}},
        "training": {"global_batch_size": 256},
        "top_k": 5,
    },
    # A GPU count that does not fill whole nodes.
    {
        "model": {"preset": "llama3-8b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 12},
        "training": {"global_batch_size": 96},
        "top_k": 3,
    },
]


def plan_requests(count: int = 50, seed: int = 15) -> list[Request]:
    """`count` plan requests: each preset at least once, each profile at least once."""
    rng = random.Random(seed)
    presets = sorted(load_presets())
    profiles = sorted(load_profiles())
    out: list[Request] = []
    for i in range(count):
        preset = presets[i % len(presets)]
        profile = profiles[i % len(profiles)]
        num_gpus = _gpus_for(preset, rng)
        training: dict[str, Any] = {"global_batch_size": _batch_for(num_gpus, rng)}
        training["precision"] = rng.choice(_precisions(profile))
        if rng.random() < 0.2:
            training["runtime"] = {"flash_attention": False, "overlap_grad_reduce": False}
        if rng.random() < 0.2:
            training["train_tokens"] = 3e11
        request: Request = {
            "model": {"preset": preset},
            "cluster": {"profile": profile, "num_gpus": num_gpus},
            "training": training,
            "top_k": rng.choice([1, 3, 5]),
        }
        if constraints := rng.choice(_CONSTRAINTS):
            request["constraints"] = constraints
        if i % 10 == 9:
            request["objective"] = "gpu_efficiency"
        out.append(request)
    return out + _FIXED_PLANS


def _factor(n: int, rng: random.Random, parts: int) -> list[int]:
    """n split into `parts` factors whose product is n, drawn at random among powers of two."""
    sizes = [1] * parts
    while n > 1:
        j = rng.randrange(parts)
        sizes[j] *= 2
        n //= 2
    return sizes


def estimate_requests(count: int = 200, seed: int = 15) -> list[Request]:
    """`count` estimate requests: random presets, profiles and layouts (some break rules on purpose)."""
    rng = random.Random(seed)
    presets = sorted(load_presets())
    profiles = sorted(load_profiles())
    out: list[Request] = []
    for _ in range(count):
        preset = rng.choice(presets)
        profile = rng.choice(profiles)
        num_gpus = _gpus_for(preset, rng)
        tp, pp, dp, cp = _factor(num_gpus, rng, 4)
        if tp > 8 and rng.random() < 0.7:
            tp, dp = 8, dp * tp // 8
        mbs = rng.choice([1, 1, 2, 4])
        layout: dict[str, Any] = {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "micro_batch_size": mbs,
            "recompute": rng.choice(["none", "selective", "full"]),
            "sequence_parallel": tp > 1 and rng.random() < 0.7,
            "zero_stage": rng.choice([0, 1, 1, 2, 3]),
        }
        if pp > 1 and rng.random() < 0.4:
            layout["vp"] = rng.choice([2, 3, 4])
        if preset in {"mixtral-8x7b", "deepseek-v3"} and rng.random() < 0.7:
            layout["ep"] = rng.choice([2, 4, 8])
        training: dict[str, Any] = {
            "global_batch_size": dp * mbs * rng.choice([1, 4, 8, 16, 32]),
            "precision": rng.choice(_precisions(profile)),
        }
        if rng.random() < 0.15:
            training["runtime"] = {
                "flash_attention": rng.random() < 0.5,
                "overlap_grad_reduce": rng.random() < 0.5,
                "overlap_param_gather": rng.random() < 0.5,
                "tp_comm_overlap": rng.random() < 0.5,
                "scatter_gather_p2p": rng.random() < 0.5,
            }
        if rng.random() < 0.2:
            training["train_tokens"] = 1e12
        out.append(
            {
                "model": {"preset": preset},
                "cluster": {"profile": profile, "num_gpus": num_gpus},
                "training": training,
                "layout": layout,
            }
        )
    return out
