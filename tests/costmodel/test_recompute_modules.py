"""Selective recompute of named modules (`RuntimeFeatures.recompute_modules`, Megatron-Core `--recompute-modules`):
what each module drops from memory, reruns in time and adds in flop, by hand on small shapes."""

import numpy as np
import pytest

from planner.costmodel import compute
from planner.costmodel.candidates import SELECTIVE, Candidates
from planner.costmodel.flops import recompute_flop_per_sequence
from planner.costmodel.memory import activation_bytes_per_layer, working_bytes
from planner.costmodel.recompute import dispatch_reruns, selective_modules
from planner.layout import Layout
from planner.numerics import numerics
from planner.specs import MLASpec, ModelSpec, MoESpec, Precision, Recompute, RecomputeModule, RuntimeFeatures
from tests.costmodel.hardware import fabric_hardware

H, S, FFN, EXPERT_FFN, TOP_K = 1024, 1024, 2048, 512, 2
SHAPE = {"num_layers": 4, "hidden_size": H, "num_attention_heads": 8, "vocab_size": 1000, "seq_length": S}
DENSE = ModelSpec(**SHAPE, ffn_hidden_size=FFN, gated_mlp=True)
MOE = ModelSpec(
    **SHAPE,
    gated_mlp=True,
    moe=MoESpec(num_experts=8, top_k=TOP_K, expert_ffn_hidden_size=EXPERT_FFN, num_shared_experts=1),
)
BF16 = numerics(Precision.BF16)
"""No dropout: 2-byte activations and saved GEMM inputs, no masks."""
HW = fabric_hardware(8, 8)
TOKENS = S  # micro-batch 1


def _candidates(model: ModelSpec, recompute: Recompute = Recompute.SELECTIVE) -> Candidates:
    layout = Layout(tp=1, pp=1, dp=1, recompute=recompute)
    return Candidates.from_layouts([layout], model.num_layers, global_batch_size=8)


def _runtime(*modules: str) -> RuntimeFeatures:
    return RuntimeFeatures.model_validate({"recompute_modules": list(modules)})


def _bytes(model: ModelSpec, rt: RuntimeFeatures, recompute: Recompute = Recompute.SELECTIVE) -> float:
    return float(activation_bytes_per_layer(model, _candidates(model, recompute), rt, BF16)[0])


# Bytes per token each module drops, tp = etp = 1, gated MLP: 2 x 2 bytes of activation input plus the 2-byte saved
# fc2 input per unit of MLP width; a routed copy also keeps its permuted 2h input.
DROPPED_PER_TOKEN = [
    (MOE, ("moe_act",), TOP_K * 2 * EXPERT_FFN),  # the experts' activation outputs
    (MOE, ("shared_experts",), 6 * EXPERT_FFN),  # the one shared expert's tensors
    (MOE, ("moe",), TOP_K * (6 * EXPERT_FFN + 2 * H) + 6 * EXPERT_FFN),  # routed copies and experts, shared
    (MOE, ("moe", "moe_act", "shared_experts"), TOP_K * (6 * EXPERT_FFN + 2 * H) + 6 * EXPERT_FFN),  # moe covers both
    (MOE, ("layernorm",), 2 * H),  # the pre-MLP norm's output (the only norm of its own)
    (DENSE, ("mlp",), 6 * FFN + 2 * H),  # the MLP's tensors and its fused norm's output
    (DENSE, ("core_attn",), 0),  # flash attention keeps no scores: nothing to drop
]


@pytest.mark.parametrize(
    ("model", "modules", "per_token"),
    DROPPED_PER_TOKEN,
    ids=["moe_act", "shared", "moe", "moe-covers", "layernorm", "mlp", "core-flash"],
)
def test_each_module_drops_what_it_rebuilds(model: ModelSpec, modules: tuple[str, ...], per_token: int) -> None:
    kept = _bytes(model, RuntimeFeatures(), Recompute.NONE)
    assert kept - _bytes(model, _runtime(*modules)) == per_token * TOKENS
    working = float(working_bytes(model, _candidates(model), _runtime(*modules), BF16)[0])
    assert working == per_token * TOKENS  # the one layer being recomputed rebuilds exactly that


def test_the_default_is_the_attention_core_and_unchanged() -> None:
    """Unset, selective recompute is the core (with MLA its up-projections too): naming those modules changes no
    number, and without flash attention the core's scores are what it drops."""
    no_flash = RuntimeFeatures(flash_attention=False)
    named = RuntimeFeatures(flash_attention=False, recompute_modules=(RecomputeModule.CORE_ATTN,))
    assert _bytes(DENSE, no_flash) == _bytes(DENSE, named)
    scores = 2 * 8 * S * TOKENS  # softmax output, 2 bytes, heads x s per token (no dropout)
    assert _bytes(DENSE, no_flash, Recompute.NONE) - _bytes(DENSE, no_flash) == scores
    without_core = RuntimeFeatures(flash_attention=False, recompute_modules=(RecomputeModule.MLP,))
    assert _bytes(DENSE, no_flash, Recompute.NONE) - _bytes(DENSE, without_core) == (6 * FFN + 2 * H) * TOKENS
    mla = DENSE.model_copy(
        update={"mla": MLASpec(kv_lora_rank=256, qk_head_dim=64, qk_pos_emb_head_dim=32, v_head_dim=64)}
    )
    assert selective_modules(mla, RuntimeFeatures()) == (RecomputeModule.CORE_ATTN, RecomputeModule.MLA_UP_PROJ)
    assert selective_modules(MOE, _runtime("moe_act", "layernorm")) == (
        RecomputeModule.LAYERNORM,
        RecomputeModule.MOE_ACT,
    )


def test_rerun_seconds_by_hand() -> None:
    """moe_act reruns the experts' activation (read 4, write 2 bytes per element of top_k x width); mlp the dense
    MLP's two GEMMs, its activation and its norm (read 2, write 2 per hidden element); HBM at 1 TB/s."""
    c = _candidates(MOE)
    act = compute.layer_times(MOE, c, HW, _runtime("moe_act")).recompute_s[0]
    assert act == pytest.approx(6 * TOP_K * EXPERT_FFN * TOKENS / 1e12, rel=1e-12)
    c = _candidates(DENSE)
    mlp = compute.layer_times(DENSE, c, HW, _runtime("mlp")).recompute_s[0]
    gemms = compute.gemm_time_s(TOKENS, 2 * FFN, H, HW) + compute.gemm_time_s(TOKENS, H, FFN, HW)
    assert mlp == pytest.approx(float(gemms[()]) + (6 * FFN + 4 * H) * TOKENS / 1e12, rel=1e-12)
    both = compute.layer_times(DENSE, c, HW, _runtime("mlp", "core_attn")).recompute_s[0]
    core = compute.layer_times(DENSE, c, HW, RuntimeFeatures()).recompute_s[0]  # the default: the core alone
    assert both == pytest.approx(mlp + core, rel=1e-12)


def test_rerun_flop_by_hand() -> None:
    """mlp reruns fc1 (h -> 2 ffn, gated) and fc2 (ffn -> h) in each of the 4 layers: 2 T h (2 ffn + ffn) each;
    moe_act and layernorm rerun no GEMM."""
    mlp = recompute_flop_per_sequence(DENSE, SELECTIVE, modules=(RecomputeModule.MLP,))
    assert mlp == 4 * 2 * S * H * 3 * FFN
    assert recompute_flop_per_sequence(MOE, SELECTIVE, modules=(RecomputeModule.MOE_ACT,)) == 0.0
    moe = recompute_flop_per_sequence(MOE, SELECTIVE, modules=(RecomputeModule.MOE,))
    experts = (TOP_K + 1) * 2 * S * H * 3 * EXPERT_FFN  # two routed and one shared expert per token
    assert moe == 4 * (experts + 2 * S * H * 8)  # plus the router h -> 8


def test_whole_moe_recompute_reruns_the_dispatch() -> None:
    """Recomputing the MoE layer reruns its dispatch and combine once per micro-batch; other modules do not."""
    c = _candidates(MOE)
    assert dispatch_reruns(MOE, c, _runtime("moe"), None).tolist() == [1.0]
    assert dispatch_reruns(MOE, c, _runtime("moe_act", "shared_experts"), None).tolist() == [0.0]
    none = _candidates(MOE, Recompute.NONE)
    assert dispatch_reruns(MOE, none, _runtime("moe"), None).tolist() == [0.0]
    assert np.all(dispatch_reruns(MOE, _candidates(MOE, Recompute.FULL), RuntimeFeatures(), None) == 1.0)
