"""What the TorchTitan launches of every release share: the data-parallel degrees, the stage split, the data notes.

Both releases build the same device mesh degrees (`ParallelDims`: dp_replicate * dp_shard * cp * tp * pp
= world size) and split the layers with the same generator (torchtitan/distributed/pipeline_parallel.py
`generate_llm_fqn_per_model_part` in v0.2.2, `_generate_llm_fqn_per_model_part` in v0.3.0), so each rule
is written here once; the release modules only spell the keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.launch.common import stage_layers
from planner.launch.inputs import LaunchInputs
from planner.layout import Layout
from planner.rules.core import counted_stages, rank_chunks
from planner.specs import ModelSpec, TrainingSpec

__all__ = [
    "DataKeys",
    "data_notes",
    "dp_degrees",
    "local_batch_size",
    "module_names",
    "pipeline_keys",
    "pipeline_split",
    "virtual_layers",
]


def dp_degrees(layout: Layout) -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree).

    ZeRO 1-3 shard over all of dp; ZeRO 0 replicates, except that experts shard out of dp_shard * cp, and
    tp too when etp = 1 (ep must divide it: v0.2.2 `ParallelDims._validate`, v0.3.0's efsdp = dp_shard * cp *
    tp / ep), so the least such shard degree is used.
    """
    if layout.zero_stage >= 1:
        return 1, layout.dp
    borrowed = layout.cp * layout.tp // layout.etp
    shard = layout.ep // math.gcd(layout.ep, borrowed)
    return layout.dp // shard, shard


def virtual_layers(model: ModelSpec, layout: Layout) -> list[int]:
    """Transformer layers per virtual stage in TorchTitan's looped order (stage s on rank s % pp).

    Each rank's layers, with the embedding and the loss where the layout counts them as layers (Megatron's
    account_for_*_in_pipeline_split), over its vp chunks as Megatron-Core holds them (`rank_chunks`: evenly,
    or with the first rank's first or the last rank's last chunk short); the counted embedding takes a
    layer's slot from the first chunk, the loss from the last.
    """
    in_split = (
        int(layout.account_for_embedding_in_pipeline_split),
        int(layout.account_for_loss_in_pipeline_split),
    )
    chunks = rank_chunks(counted_stages(stage_layers(model, layout), in_split), layout.vp)
    virtual = [rank[v] for v in range(layout.vp) for rank in chunks]
    virtual[0] -= in_split[0]
    virtual[-1] -= in_split[1]
    return virtual


def module_names(virtual: list[int], output: str) -> list[list[str]]:
    """Module FQNs per virtual stage, given its transformer layers (`virtual_layers`).

    `output` is the output projection's name: `output` in v0.2.2, `lm_head` in v0.3.0.
    """
    parts: list[list[str]] = []
    layer = 0
    for count in virtual:
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
    virtual = virtual_layers(model, layout)
    inner = set(virtual[1:-1])
    middle = max(virtual[0], virtual[-1]) if not inner else next(iter(inner)) if len(inner) == 1 else None
    if middle is not None and virtual[0] <= middle and virtual[-1] <= middle:
        return {
            "pipeline_parallel_layers_per_stage": middle,
            "pipeline_parallel_first_stage_less_layers": middle - virtual[0],
            "pipeline_parallel_last_stage_less_layers": middle - virtual[-1],
        }
    return {"module_fqns_per_model_part": module_names(virtual, output)}


def pipeline_keys(model: ModelSpec, layout: Layout, output: str) -> dict[str, object]:
    """The `parallelism` keys of a pipelined layout (none for pp = 1): the schedule (Interleaved1F1B for
    vp > 1, else 1F1B), the micro-batch size and the stage split (`pipeline_split`), the same in both releases."""
    if layout.pp == 1:
        return {}
    return {
        "pipeline_parallel_schedule": "Interleaved1F1B" if layout.vp > 1 else "1F1B",
        "pipeline_parallel_microbatch_size": layout.micro_batch_size,
    } | pipeline_split(model, layout, output)


def local_batch_size(training: TrainingSpec, layout: Layout) -> int:
    """`training.local_batch_size`: with pp > 1 a step is one pipeline pass over local / micro-batch micro-batches
    (the schedule splits the local batch); else the micro-batch, accumulated to the global batch."""
    return training.global_batch_size // layout.dp if layout.pp > 1 else layout.micro_batch_size


@dataclass(frozen=True, slots=True)
class DataKeys:
    """Where a release reads the dataset path and the tokenizer folder: the dotted key and its CLI flag."""

    data: str
    data_flag: str
    tokenizer: str
    tokenizer_flag: str


def data_notes(inputs: LaunchInputs, sample: str, keys: DataKeys) -> list[str]:
    """What the launch trains on: `sample` (TorchTitan's sample data) without inputs, else what was given and
    the placeholders left."""
    if not inputs.data_path and not inputs.tokenizer_model:
        return [sample]
    left = [] if inputs.data_path else [f"{keys.data_flag} DATA (the sample dataset c4_test is used)"]
    if not inputs.tokenizer_model:
        left.append(f"{keys.tokenizer_flag} TOKENIZER_DIR (the test tokenizer is used)")
    given = " and ".join(
        key for key, value in ((keys.data, inputs.data_path), (keys.tokenizer, inputs.tokenizer_model)) if value
    )
    tail = f"; placeholders left: {', '.join(left)}" if left else ""
    return [f"Trains on {given} as given{tail}."]
