"""Parameter counts: Narayanan 2021 Eq. 2, GQA/gated/untied/MoE generalisations, per-GPU shards."""

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.params import active_params, narayanan_eq2_params, params_per_gpu, total_params
from planner.layout import Layout
from planner.presets import get_preset
from planner.specs import ModelSpec, MoESpec

V, S = 51200, 2048

# Narayanan 2021 Table 1: (preset id, heads, hidden, layers, published billions, abs tolerance in billions).
TABLE1 = [
    # Eq. 2 gives 1.652B; the paper prints 1.7, so the row needs 0.06 rather than 0.05.
    ("megatron-1.7b", 24, 2304, 24, 1.7, 0.06),
    ("megatron-3.6b", 32, 3072, 30, 3.6, 0.05),
    ("megatron-7.5b", 32, 4096, 36, 7.5, 0.05),
    ("megatron-18.4b", 48, 6144, 40, 18.4, 0.05),
    ("megatron-39.1b", 64, 8192, 48, 39.1, 0.05),
    ("megatron-76.1b", 80, 10240, 60, 76.1, 0.05),
    ("megatron-145.6b", 96, 12288, 80, 145.6, 0.05),
    ("megatron-310.1b", 128, 16384, 96, 310.1, 0.05),
    ("megatron-529.6b", 128, 20480, 105, 529.6, 0.05),
    ("megatron-1t", 160, 25600, 128, 1008.0, 0.05),
]
TABLE1_IDS = [row[0] for row in TABLE1]


@pytest.mark.parametrize(("preset", "heads", "hidden", "layers", "billions", "tol"), TABLE1, ids=TABLE1_IDS)
def test_eq2_matches_table1(preset: str, heads: int, hidden: int, layers: int, billions: float, tol: float) -> None:
    assert narayanan_eq2_params(layers, hidden, V, S) / 1e9 == pytest.approx(billions, abs=tol)


def test_eq2_integer_form_small_shape() -> None:
    # l=2, h=4, V=10, s=3: 12*2*16 + 13*2*4 + (10+3)*4 = 384 + 104 + 52 = 540
    assert narayanan_eq2_params(2, 4, 10, 3) == 540


GPT_PRESETS = [(row[0], row[1], row[2], row[3]) for row in TABLE1] + [("gpt3-175b", 96, 12288, 96)]


@pytest.mark.parametrize(("preset", "heads", "hidden", "layers"), GPT_PRESETS, ids=[r[0] for r in GPT_PRESETS])
def test_gpt_preset_total_is_eq2_plus_final_layernorm(preset: str, heads: int, hidden: int, layers: int) -> None:
    model = get_preset(preset).model
    assert (model.num_attention_heads, model.hidden_size, model.num_layers) == (heads, hidden, layers)
    # Eq. 2 counts 12lh^2 + 13lh + (V+s)h; the final LayerNorm (weight + bias = 2h) is extra.
    assert total_params(model) == narayanan_eq2_params(layers, hidden, V, S) + 2 * hidden


def _tiny(**overrides: object) -> ModelSpec:
    """h=8, a=4, g=2 (head_dim 2, kv_hidden 4), ffn=12, V=10, s=4, 2 layers."""
    fields: dict[str, object] = {
        "num_layers": 2,
        "hidden_size": 8,
        "num_attention_heads": 4,
        "num_query_groups": 2,
        "ffn_hidden_size": 12,
        "vocab_size": 10,
        "seq_length": 4,
        "gated_mlp": True,
        "tied_embeddings": False,
        "linear_bias": False,
    }
    fields.update(overrides)
    return ModelSpec.model_validate(fields)


TINY_TOTALS = [
    # attention: Q 8*8 + K,V 2*8*4 + O 8*8 = 192; gated MLP 3*8*12 = 288; 2 RMSNorms 2*8 = 16
    # layers 2*(192+288+16) = 992; embedding 10*8 = 80; output 80; final norm 8
    ({}, 992 + 80 + 80 + 8),
    # attention + biases (8 + 2*4 + 8) = 216; gated MLP + biases (2*12 + 8) = 320; 2 LayerNorms 2*16 = 32
    # layers 2*(216+320+32) = 1136; embedding 80 + positions 4*8 = 112; tied output 0; final LayerNorm 16
    ({"linear_bias": True, "learned_position_embeddings": True, "tied_embeddings": True}, 1136 + 112 + 16),
    # non-gated, no bias, untied: MLP 2*8*12 = 192; layers 2*(192+192+16) = 800; + 80 + 80 + 8
    ({"gated_mlp": False}, 800 + 80 + 80 + 8),
    # head_dim 3 (not 8 / 4): q = 12, kv = 6; Q 8*12 + K,V 2*8*6 + O 12*8 = 288; layers 2*(288+288+16) = 1184
    ({"head_dim": 3}, 1184 + 80 + 80 + 8),
]


@pytest.mark.parametrize(
    ("overrides", "expected"), TINY_TOTALS, ids=["gqa-gated-untied", "bias-tied-pos", "plain", "head-dim"]
)
def test_tiny_total_params(overrides: dict[str, object], expected: int) -> None:
    model = _tiny(**overrides)
    assert total_params(model) == expected
    assert active_params(model) == expected


def _tiny_moe(freq: int, first_dense: int) -> ModelSpec:
    """MHA h=8, a=g=4, dense ffn 16, 4 layers, V=10; 4 experts of width 6, top-2, 1 shared."""
    return ModelSpec(
        num_layers=4,
        hidden_size=8,
        num_attention_heads=4,
        num_query_groups=4,
        ffn_hidden_size=16,
        vocab_size=10,
        seq_length=4,
        moe=MoESpec(
            num_experts=4,
            top_k=2,
            expert_ffn_hidden_size=6,
            num_shared_experts=1,
            moe_layer_freq=freq,
            first_k_dense_layers=first_dense,
        ),
    )


# attention 8*8*4 = 256 + 2 norms 16 = 272 per layer; dense MLP 2*8*16 = 256 -> dense layer 528
# one expert 2*8*6 = 96; MoE layer 272 + router 8*4 + shared 96 + 4 experts 384 = 784
# ends: embedding 80 + output 80 + final norm 8 = 168; inactive experts per MoE layer (4-2)*96 = 192
MOE_ROWS = [
    # first_k=1, freq=1: layers 1,2,3 MoE
    (1, 1, 3, 1 * 528 + 3 * 784 + 168, 1 * 528 + 3 * 784 + 168 - 3 * 192),
    # first_k=1, freq=2: layers 1,3 MoE
    (2, 1, 2, 2 * 528 + 2 * 784 + 168, 2 * 528 + 2 * 784 + 168 - 2 * 192),
    # first_k=0, freq=1: all 4 MoE
    (1, 0, 4, 4 * 784 + 168, 4 * 784 + 168 - 4 * 192),
]


@pytest.mark.parametrize(
    ("freq", "first_dense", "moe_layers", "total", "active"), MOE_ROWS, ids=["k1-f1", "k1-f2", "k0-f1"]
)
def test_tiny_moe_params(freq: int, first_dense: int, moe_layers: int, total: int, active: int) -> None:
    model = _tiny_moe(freq, first_dense)
    assert model.num_moe_layers == moe_layers
    assert total_params(model) == total
    assert active_params(model) == active


SHARD_ROWS = [
    # one stage holds everything: 2*(192+288+16) + 80 + 80 + 8 = 1160 (== total_params)
    (Layout(tp=1, pp=1, dp=1), 1160.0),
    # tp=2: 2 layers*((192+288)/2 + 16) = 512; embedding 80/2 + output 80/2 + final norm 8 = 88
    (Layout(tp=2, pp=1, dp=1), 512.0 + 88.0),
    # tp=2, pp=2: 1 layer (240 + 16) = 256; max(first 80/2, last 80/2 + 8) = 48
    (Layout(tp=2, pp=2, dp=1), 256.0 + 48.0),
]


@pytest.mark.parametrize(("layout", "expected"), SHARD_ROWS, ids=["tp1-pp1", "tp2-pp1", "tp2-pp2"])
def test_params_per_gpu_dense_shard(layout: Layout, expected: float) -> None:
    c = Candidates.from_layouts([layout], num_layers=2, global_batch_size=8)
    dense, expert = params_per_gpu(_tiny(), c)
    assert dense[0] == pytest.approx(expected, rel=1e-12)
    assert expert[0] == 0.0


def test_params_per_gpu_expert_shard() -> None:
    # 3 MoE layers of 4 layers on one stage; 4 experts * 96 = 384 per layer, split over ep=2 -> 3 * 384 / 2
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=2, ep=2)], num_layers=4, global_batch_size=8)
    _, expert = params_per_gpu(_tiny_moe(1, 1), c)
    np.testing.assert_allclose(expert, [3 * 384 / 2], rtol=1e-12)
