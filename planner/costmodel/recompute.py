"""Which layers full recomputation reruns: every layer, or the first k of each pipeline stage (block).

Source: Megatron-Core `TransformerConfig.recompute_method` (core_v0.16.1
`transformer_config.py`: "block will recompute the input activations for only a
set number of transformer layers per pipeline stage. The rest of the layers in
the pipeline stage will not have any activations recomputed") and
`TransformerBlock._checkpointed_forward` (block: layers with index below
`recompute_num_layers` run checkpointed, the rest plainly). Without
interleaving a stage is one `TransformerBlock`; with it each model chunk is one,
which the search's per-key tables cannot express (rule recompute_block).
"""

from __future__ import annotations

import numpy as np

from planner.costmodel.candidates import FULL, Candidates, FloatArray, IntArray
from planner.costmodel.params import stage_kinds

__all__ = ["recomputed_layers", "recomputed_layers_in_model"]


def recomputed_layers(c: Candidates, layers: IntArray, block: int | None) -> IntArray:
    """Layers of a stage of `layers` layers that run their recompute mode: under full recompute with `block`
    (`TrainingSpec.recompute_num_layers`) the first min(block, layers); otherwise all of them (selective
    recompute reruns every layer's attention core; none reruns nothing, whatever the count)."""
    if block is None:
        return layers
    return np.asarray(np.where(c.recompute == FULL, np.minimum(layers, block), layers))


def recomputed_layers_in_model(c: Candidates, block: int | None) -> FloatArray:
    """`recomputed_layers` summed over the pipeline's stages (one first, pp - 2 middle, one last stage; the
    only stage when pp = 1): the layers whose recompute mode runs, of `num_layers`."""
    first, middle, last = (recomputed_layers(c, s.layers, block) for s in stage_kinds(c))
    return np.asarray(first + np.maximum(c.pp - 2, 0) * middle + np.where(c.pp > 1, last, 0), dtype=np.float64)
