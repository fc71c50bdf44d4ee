"""The model a request resolves to, with where each value came from.

A plan is only as right as the shape it planned: a pasted config.json whose
`max_position_embeddings` is an inference context, or a preset whose sequence
length was overridden, must show in the answer. Each `ResolvedModel` carries
the `ModelSpec` and, per field (dotted under `moe`), its source: the preset
(with the preset's citation), the request, a default of `ModelSpec`, or the
Hugging Face key it was read from (`planner.hf_config`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.costmodel.params import active_params, total_params
from planner.hf_config import resolve_hf_config
from planner.presets import get_preset
from planner.specs import ModelSpec

__all__ = ["ResolvedModel", "resolve_hf", "resolve_preset", "resolve_shape"]


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    model: ModelSpec
    sources: Mapping[str, str]
    """ModelSpec field (dotted under moe) -> where its value came from."""

    @property
    def total_params(self) -> int:
        return total_params(self.model)

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (MoE: routed top-k and shared experts only)."""
        return active_params(self.model)


def _fields(model: ModelSpec) -> list[str]:
    """Every field of the model that has a value, dotted under moe."""
    names = [k for k in ModelSpec.model_fields if k != "moe" and getattr(model, k) is not None]
    if model.moe is not None:
        names += [f"moe.{k}" for k in type(model.moe).model_fields]
    return names


def _given(model: ModelSpec) -> set[str]:
    """The fields the input stated (the rest took ModelSpec's defaults)."""
    given = set(model.model_fields_set) - {"moe"}
    if model.moe is not None:
        given |= {f"moe.{k}" for k in model.moe.model_fields_set}
    return given


_DEFAULT_SOURCES = {
    "num_query_groups": "default (= num_attention_heads: multi-head attention)",
    "ffn_hidden_size": "default (4 x hidden_size)",
    "head_dim": "default (hidden_size / num_attention_heads)",
}


def resolve_shape(model: ModelSpec) -> ResolvedModel:
    """An explicit shape: what the request gave, and the defaults it took."""
    given = _given(model)
    sources = {f: "request" if f in given else _DEFAULT_SOURCES.get(f, "default") for f in _fields(model)}
    return ResolvedModel(model, dict(sorted(sources.items())))


def resolve_preset(preset_id: str, seq_length: int | None = None) -> ResolvedModel:
    """A built-in preset, optionally at another sequence length."""
    preset = get_preset(preset_id)
    model = preset.model.model_copy(update={"seq_length": seq_length}) if seq_length else preset.model
    sources = dict.fromkeys(_fields(model), f"preset {preset.id} ({preset.source})")
    if seq_length:
        sources["seq_length"] = "request (seq_length)"
    return ResolvedModel(model, dict(sorted(sources.items())))


def resolve_hf(config: Mapping[str, Any], seq_length: int | None = None) -> ResolvedModel:
    """A Hugging Face config.json (see `planner.hf_config.resolve_hf_config`)."""
    resolved = resolve_hf_config(config, seq_length)
    return ResolvedModel(resolved.model, resolved.sources)
