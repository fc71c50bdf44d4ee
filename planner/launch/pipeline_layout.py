"""Megatron-Core's pipeline layout string: written for a split whose model chunks differ in size, read back.

The string lists the pp x vp virtual stages in layer order, separated by "|"; virtual stage i is model chunk
i // pp of pipeline rank i mod pp. In a stage "E" is the embedding, "t" a decoder layer, "m" an MTP layer and "L"
the loss; "x*n" repeats x and "(...)*n" a group, and commas are cosmetic; an empty stage holds nothing. Source:
Megatron-LM megatron/core/transformer/pipeline_parallel_layer_layout.py (`PipelineParallelLayerLayout`: the
1-D-to-2-D reshape and `parse_str_to_list`) and the `--pipeline-model-parallel-layout` help in
megatron/training/arguments.py (core_v0.15.0 to core_v0.19.2; the class is in Megatron-Core since core_v0.13.0).
"""

from __future__ import annotations

import re

from planner.costmodel.candidates import stages_of
from planner.layout import Layout
from planner.rules.core import chunks_uneven, rank_chunks
from planner.specs import ModelSpec

__all__ = ["hybrid_layer_pattern", "hybrid_segments", "layout_chunks", "layout_stages", "pipeline_layout"]

_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_REPEAT = re.compile(r"(.)\*(\d+)")


def pipeline_layout(model: ModelSpec, layout: Layout) -> str | None:
    """The layout string of a split whose model chunks differ in layers (`planner.rules.core.chunks_uneven`,
    held as `rank_chunks`), else None (Megatron's first/last-count flags spell the split)."""
    stages = stages_of(layout, model.num_layers)
    if layout.pp == 1 or not chunks_uneven(stages, layout.vp):
        return None
    chunks = rank_chunks(stages, layout.vp)
    entries = []
    for v in range(layout.vp):
        for r in range(layout.pp):
            n = chunks[r][v]
            embedding = "E" if (v, r) == (0, 0) else ""
            # The MTP layers sit beside the loss (Megatron-Bridge's set_deepseek_v3_pipeline_model_parallel_layout).
            loss = "m" * model.mtp_num_layers + "L" if (v, r) == (layout.vp - 1, layout.pp - 1) else ""
            entries.append(embedding + ("t" if n == 1 else f"t*{n}" if n > 1 else "") + loss)
    return "|".join(entries)


def hybrid_layer_pattern(model: ModelSpec, layout: Layout) -> str:
    """A hybrid model's pattern with the plan's stage split in it, as Megatron-LM core_v0.19 reads
    `--hybrid-layer-pattern`: "|" between the pp x vp virtual stages in layer order, virtual stage i being model
    chunk i // pp of pipeline rank i mod pp (the planner's chunks, `rank_chunks`; an empty segment is an empty
    chunk). Without pipelining, the pattern as it is.

    Source: Megatron-LM core_v0.19.0 megatron/core/models/hybrid/hybrid_layer_allocation.py select_pipeline_segment
    (segment vp_stage * pp + pp_rank; the segment count a multiple of pp) and megatron/training/arguments.py
    validate_args (vp = segments / pp; the pipes replace --decoder-first/last-pipeline-num-layers, the
    account_for_* flags, the virtual-stage flags and --pipeline-model-parallel-layout, which it refuses beside them).
    """
    assert model.hybrid_pattern is not None
    return "|".join(hybrid_segments(model, layout))


def hybrid_segments(model: ModelSpec, layout: Layout) -> list[str]:
    """The hybrid pattern cut into the pp x vp virtual stages of `hybrid_layer_pattern`, in layer order."""
    pattern = model.hybrid_pattern
    assert pattern is not None
    if layout.pp == 1:
        return [pattern]
    chunks = rank_chunks(stages_of(layout, model.num_layers), layout.vp)
    segments, start = [], 0
    for v in range(layout.vp):
        for r in range(layout.pp):
            segments.append(pattern[start : start + chunks[r][v]])
            start += chunks[r][v]
    assert start == len(pattern)
    return segments


def layout_stages(text: str) -> list[str]:
    """A layout string as one string of layer letters per virtual stage, repetitions unrolled
    ("Et|(tt|)*2L" -> ["Et", "tt", "tt", "L"]), as `parse_str_to_list` reads it."""
    text = text.replace(",", "")
    while (group := _GROUP.search(text)) is not None:
        text = text[: group.start()] + group.group(1) * int(group.group(2)) + text[group.end() :]
    return _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), text).split("|")


def layout_chunks(text: str, pp: int) -> list[list[int]]:
    """Decoder layers ("t") of each pipeline rank's model chunks, in chunk order, from a layout string for pp
    ranks. Raises ValueError when pp does not divide the stage count."""
    stages = layout_stages(text)
    if len(stages) % pp:
        raise ValueError(f"{len(stages)} layout stages do not divide over pp({pp})")
    return [[stage.count("t") for stage in stages[r::pp]] for r in range(pp)]
