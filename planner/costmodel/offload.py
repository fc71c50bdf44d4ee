"""Activation offloading to host memory: how many layers' activations leave the GPU, and the copy time not hidden.

Source: Transformer Engine docs/features/other_optimizations/cpu_offloading/cpu_offloading.rst (commit d0067d0),
"Default Offloading Scheduling", which Megatron-Core runs for `cpu_offloading_num_layers` = k of the model's L
layers (megatron/core/transformer/transformer_block.py, get_cpu_offload_context, core_v0.16.1):

- the first k layers are offloaded; an offload starts as soon as a tensor is saved for backward;
- at most L - k layers' activations are on the GPU at once, and compute and reloads stall to keep it so;
- a reload must be complete when its layer's backward needs it;
- k = L - 1 leaves one set on the GPU, so compute and copies cannot overlap.

Copies run on their own stream at the host link's rate (`Hardware.host_link_bytes_per_s`, a datasheet peak, so
the exposed time is a lower bound); the HBM traffic they add to the GPU's own work is not priced (the document
calls it unlikely to slow GEMMs).
"""

from __future__ import annotations

import numpy as np

from planner.costmodel.candidates import FloatArray, IntArray
from planner.errors import InvalidSpecError
from planner.profiles import Hardware

__all__ = ["exposed_offload_s", "offloaded_layers"]


def offloaded_layers(requested: int, layers: IntArray | int) -> IntArray:
    """Layers of a stage whose activations are offloaded: `requested`, at most all but one of the stage's layers
    (Transformer Engine keeps at least one set on the GPU; rule activation_offload refuses more)."""
    return np.asarray(np.clip(requested, 0, np.maximum(np.asarray(layers) - 1, 0)), dtype=np.int64)


def exposed_offload_s(
    requested: int,
    layers: IntArray,
    layer_bytes: FloatArray,
    forward_s: FloatArray,
    backward_s: FloatArray,
    hw: Hardware,
) -> FloatArray:
    """Seconds per micro-batch that a stage of `layers` layers loses to offloading (forward plus backward).

    One copy of a layer's activations (`layer_bytes`) takes c = bytes / host link, each way; t is one layer's
    forward (`forward_s`) or backward (`backward_s`). With k layers offloaded and g = L - k sets on the GPU, a
    pass loses the larger of two bounds of the schedule above:

    - the stream: the k copies run one after another beside the pass's L layers, and the last layer of the pass
      waits for the last copy: k c - (L - 1) t;
    - the window: a copy overlaps at most the g - 1 other layers the GPU can hold meanwhile:
      k max(0, c - (g - 1) t), which is k c at g = 1 (no overlap, as the document says).

    Zero where nothing is offloaded.
    """
    if requested == 0:
        return np.zeros(np.broadcast_shapes(np.shape(layers), np.shape(layer_bytes)))
    if hw.host_link_bytes_per_s is None:
        raise InvalidSpecError(
            "training.activation_offload_layers", "needs node.host_link_gb_per_s in the hardware profile"
        )
    k = offloaded_layers(requested, layers).astype(np.float64)
    copy_s = layer_bytes / hw.host_link_bytes_per_s
    others = np.asarray(layers, dtype=np.float64) - 1
    on_gpu_others = np.maximum(np.asarray(layers, dtype=np.float64) - k - 1, 0)

    def one_pass(layer_s: FloatArray) -> FloatArray:
        stream = k * copy_s - others * layer_s
        window = k * np.maximum(copy_s - on_gpu_others * layer_s, 0.0)
        return np.maximum(np.maximum(stream, window), 0.0)

    return np.asarray(one_pass(forward_s) + one_pass(backward_s), dtype=np.float64)
