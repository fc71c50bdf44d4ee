"""Pipeline schedules: bubble and in-flight micro-batches.

Sources: Narayanan et al. 2021 (arXiv 2104.04473) Sec. 2.2.1 (1F1B bubble
(p-1)/m) and Sec. 2.2.2 (interleaved bubble (p-1)/(v m), v times the
point-to-point messages); Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4.2.3
and Megatron-LM `theoretical_memory_usage.py` (first stage holds min(p, m)
micro-batches; interleaving multiplies by 1 + (p-1)/(p v)).
"""

from __future__ import annotations

import numpy as np

from planner.costmodel.candidates import Candidates, FloatArray

__all__ = ["bubble_fraction", "in_flight_microbatches", "p2p_messages_per_microbatch"]


def bubble_fraction(pp: FloatArray | int, vp: FloatArray | int, m: FloatArray | int) -> FloatArray:
    """Pipeline bubble as a fraction of ideal compute time: (p - 1) / (v m)."""
    return np.asarray((np.asarray(pp) - 1) / (np.asarray(vp) * np.asarray(m)), dtype=np.float64)


def in_flight_microbatches(c: Candidates) -> FloatArray:
    """Micro-batches whose activations the first stage holds at once, in units of its layers.

    1F1B: min(p, m). Interleaved: p (1 + (p - 1)/(p v)) when m >= p. No pipeline: 1.
    """
    pp = c.pp.astype(np.float64)
    base = np.minimum(pp, c.num_microbatches)
    interleave = np.where(c.vp > 1, 1 + (pp - 1) / (pp * c.vp), 1.0)
    return base * interleave


def p2p_messages_per_microbatch(c: Candidates) -> FloatArray:
    """Sends on a stage's critical path per micro-batch: one forward, one backward, per model chunk."""
    return np.where(c.pp > 1, 2.0 * c.vp, 0.0)
