"""What the TorchTitan launches of every release share: the data-parallel degrees and the stage split.

Both releases build the same device mesh degrees (`ParallelDims`: dp_replicate * dp_shard * cp * tp * pp
= world size) and split the layers with the same generator (torchtitan/distributed/pipeline_parallel.py
`generate_llm_fqn_per_model_part` in v0.2.2, `_generate_llm_fqn_per_model_part` in v0.3.0), so each rule
is written here once; the release modules only spell the keys.
"""

from __future__ import annotations

import math

from planner.launch.common import stage_layers
from planner.layout import Layout
from planner.specs import ModelSpec

__all__ = ["dp_degrees", "module_names", "pipeline_split"]


def dp_degrees(layout: Layout) -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree).

    ZeRO 1-3 shard over all of dp; ZeRO 0 replicates, except that experts shard out of dp_shard * cp
    (ep must divide it), so the least such shard degree is used.
    """
    if layout.zero_stage >= 1:
        return 1, layout.dp
    shard = layout.ep // math.gcd(layout.ep, layout.cp)
    return layout.dp // shard, shard


def module_names(layout: Layout, stages: tuple[int, ...], output: str) -> list[list[str]]:
    """Module FQNs per virtual stage in TorchTitan's looped order (stage s on rank s % pp).

    `output` is the output projection's name: `output` in v0.2.2, `lm_head` in v0.3.0.
    """
    per_chunk = [n // layout.vp for n in stages]
    parts: list[list[str]] = []
    layer = 0
    for _ in range(layout.vp):
        for count in per_chunk:
            parts.append([f"layers.{i}" for i in range(layer, layer + count)])
            layer += count
    parts[0].insert(0, "tok_embeddings")
    parts[-1] += ["norm", output]
    return parts


def pipeline_split(model: ModelSpec, layout: Layout, output: str) -> dict[str, object]:
    """The stage split as TorchTitan's keys: layers per (virtual) stage with the end stages trimmed, or every
    stage's modules named.

    The generator gives S stages of (num_layers + first_less + last_less) / S effective layers, the first
    and last trimmed by their `*_less_layers`; that spells any split whose inner virtual stages hold m
    layers each and whose end stages hold at most m. Any other split names every stage's modules.
    """
    stages = stage_layers(model, layout)
    virtual = [n // layout.vp for _ in range(layout.vp) for n in stages]
    inner = set(virtual[1:-1])
    middle = max(virtual[0], virtual[-1]) if not inner else next(iter(inner)) if len(inner) == 1 else None
    if middle is not None and virtual[0] <= middle and virtual[-1] <= middle:
        return {
            "pipeline_parallel_layers_per_stage": middle,
            "pipeline_parallel_first_stage_less_layers": middle - virtual[0],
            "pipeline_parallel_last_stage_less_layers": middle - virtual[-1],
        }
    return {"module_fqns_per_model_part": module_names(layout, stages, output)}
