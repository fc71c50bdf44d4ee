"""The MoE token dispatch: what an MoE layer's all-to-all sends per dispatcher, and what of it compute hides.

Volume. Each rank's routed copies of its tokens go to their experts' ranks (dispatch) and come back
(combine), each pass once forward and once backward. Routing is uniform, as NVIDIA's MoE benchmarks force it
(`moe_router_force_load_balancing`: top_k of num_experts drawn without replacement per token), and the experts
sit `num_experts / ep` to a rank of the ep group, whose members fill `members_per_domain` ranks of each NVLink
domain they use (`topology.place`).

- `MoeDispatcher.ALLTOALL` (Megatron-Core `MoEAlltoAllTokenDispatcher`, TorchTitan's default): one copy per
  routed expert, so (ep - g)/ep of the top_k copies leave the domain and (g - 1)/ep stay in it.
- `MoeDispatcher.DEEPEP` / `HYBRIDEP` (the flex dispatcher, `MoEFlexTokenDispatcher`): a token crosses the
  network once per other domain holding any of its experts, to the rank of its own rail there, which forwards
  it over NVLink once per other GPU of that domain holding any (DeepSeek-V3 report, arXiv 2412.19437,
  Sec. 3.2.2: "each token ... transmitted via IB to the GPUs with the same in-node index on its target nodes
  ... instantaneously forwarded via NVLink"; DeepEP README, "normal kernels" for the NVLink and RDMA
  forwarding). A rank's NVLink traffic is then its own tokens' in-domain copies plus its share of the
  forwarding, which balance makes as many as one set per domain of the group.

Both passes run the two tiers at once: a pass takes the longer of its NVLink and its network bytes at their
rates (`comm.link` rates), plus one hop latency.

Overlap (`RuntimeFeatures.moe_a2a_overlap`, Megatron-Core `overlap_moe_expert_parallel_comm`): in the
steady state the forward of one micro-batch and the backward of another run layer by layer together, each
pass's all-to-all on its own stream (`model_chunk_schedule_plan.py`, `TransformerLayerSchedulePlan.run`):

    comm: combine backward  | dispatch forward, dispatch backward | combine forward
    comp: pre-dispatch fwd  | experts backward, experts forward   | pre-dispatch backward

so each of the four all-to-alls hides behind one compute slot (the pre-dispatch computation is attention,
router and shared experts: `fine_grained_callables.py`), and a pass shows only what its slot does not cover.
The micro-batches a schedule runs unpaired (the warm-up forwards and the cool-down backwards,
`pipeline.unpaired_microbatches`) pay their all-to-alls whole. Each pass shows as `comm.exposed_s` prices any
collective beside a window: what hides still slows the compute beside it by `comm.OVERLAP_SLOWDOWN`
(DeepSeek-V3 report Sec. 3.2.2: 20 of the H800's 132 SMs run its communication).

Memory is the schedule's without the overlap: the extra warm-up forward it schedules (one chunk) is the chunk
the plain 1F1B step holds between its forward and backward, and a paired step frees one layer of the backward
micro-batch for each layer the forward one adds, so the peak grows by about one layer's activations, which the
model does not count. The CP-SAT stage split balances the stages' paired seconds (`LayerSeconds.critical_path_s`);
the unpaired micro-batches' extra, a few of m, follows the layers of the stage found slowest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import Candidates, FloatArray, tokens_per_microbatch
from planner.costmodel.comm import exposed_s, link, network_bytes_per_s
from planner.costmodel.compute import LayerTimes
from planner.costmodel.topology import GroupPlacement, Placement
from planner.numerics import Numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, MoeDispatcher, RuntimeFeatures

__all__ = ["DispatchCopies", "EpComm", "dispatch_copies", "ep_comm_per_layer_s", "none_routed_to"]


def none_routed_to(num_experts: int, top_k: int, held: FloatArray) -> FloatArray:
    """Probability that none of a token's top_k experts is among `held` of the num_experts: uniform routing
    without replacement, prod_{i < top_k} (E - held - i) / (E - i) (hypergeometric, zero successes)."""
    held = np.asarray(held, dtype=np.float64)
    p = np.ones_like(held)
    for i in range(top_k):
        p = p * np.clip((num_experts - held - i) / (num_experts - i), 0.0, None)
    return p


@dataclass(frozen=True, slots=True)
class DispatchCopies:
    """Copies of one token a rank sends in one dispatch (or combine) pass, by tier."""

    nvlink: FloatArray
    network: FloatArray


def dispatch_copies(model: ModelSpec, group: GroupPlacement, dispatcher: MoeDispatcher) -> DispatchCopies:
    """Per token of a rank, the copies one pass sends over NVLink and over the network (module docstring)."""
    assert model.moe is not None
    experts, top_k = model.moe.num_experts, model.moe.top_k
    ep = group.size.astype(np.float64)
    in_domain = np.minimum(np.maximum(group.members_per_domain, 1), ep).astype(np.float64)
    if dispatcher is MoeDispatcher.ALLTOALL:
        return DispatchCopies(top_k * (in_domain - 1) / ep, top_k * (ep - in_domain) / ep)
    per_gpu = experts / ep
    domains = ep / in_domain
    gpu_hit = 1.0 - none_routed_to(experts, top_k, per_gpu)
    domain_hit = 1.0 - none_routed_to(experts, top_k, in_domain * per_gpu)
    nvlink = domains * (in_domain - 1) * gpu_hit  # own tokens' in-domain GPUs, plus forwarding the arrivals
    return DispatchCopies(np.asarray(nvlink, dtype=np.float64), np.asarray((domains - 1) * domain_hit))


def a2a_pass_s(
    model: ModelSpec, c: Candidates, placement: Placement, hw: Hardware, rt: RuntimeFeatures, num: Numerics
) -> FloatArray:
    """Seconds of one dispatch (or combine) pass of one MoE layer and micro-batch: the longer tier plus one hop
    latency. A copy is one token's hidden state in `num.wire_bytes`, of the rank's tokens / tp (the tp ranks
    of a group split the tokens they send)."""
    group = placement.ep
    copies = dispatch_copies(model, group, rt.moe_dispatcher)
    token_bytes = num.wire_bytes * tokens_per_microbatch(model, c) * model.hidden_size / c.tp
    nvlink = copies.nvlink * token_bytes / hw.nvlink_bytes_per_s
    network = copies.network * token_bytes / network_bytes_per_s(hw)
    return np.asarray(np.maximum(nvlink, network) + link(group, hw).latency_s, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class EpComm:
    """EP all-to-all seconds of one average layer and micro-batch on the critical path.

    `paired_s`: a micro-batch whose passes run beside another's (all of them without overlap, when it is the
    whole cost); `unpaired_extra_s`: what a micro-batch the schedule runs unpaired pays on top of that.
    """

    paired_s: FloatArray
    unpaired_extra_s: FloatArray


def ep_comm_per_layer_s(
    model: ModelSpec,
    c: Candidates,
    placement: Placement,
    hw: Hardware,
    rt: RuntimeFeatures,
    num: Numerics,
    layer: LayerTimes,
    reruns: FloatArray,
) -> EpComm:
    """All-to-all of one average layer and micro-batch: dispatch and combine, forward and backward (and the
    forward's again per recomputed forward, `reruns`: `recompute.dispatch_reruns`), averaged over all
    layers (the MoE layers' share of them); with `rt.moe_a2a_overlap` each pass beside its compute slot (module
    docstring)."""
    zeros = np.zeros(np.broadcast(c.ep, c.tp).shape)
    if model.moe is None:
        return EpComm(zeros, zeros)
    one = a2a_pass_s(model, c, placement, hw, rt, num)
    share = model.moe_layer_share
    count = 4 + 2 * reruns
    whole = np.where(c.ep > 1, share * count * one, 0.0)
    if not rt.moe_a2a_overlap:
        return EpComm(np.asarray(whole, dtype=np.float64), zeros)
    slots = (layer.moe_rest_forward_s, 2 * layer.experts_forward_s, layer.experts_forward_s, layer.moe_rest_backward_s)
    paired = np.where(c.ep > 1, share * sum(exposed_s(one, w) for w in slots), 0.0)
    return EpComm(np.asarray(paired, dtype=np.float64), np.asarray(whole - paired, dtype=np.float64))
