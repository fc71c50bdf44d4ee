"""Flop counts: Narayanan 2021 Eq. 3 and Eq. 4, Korthikanti 2022 App. A (selective recompute)."""

import pytest

from planner.costmodel.candidates import FULL, NONE, SELECTIVE
from planner.costmodel.flops import (
    hardware_flop_per_sequence,
    model_flop_per_sequence,
    narayanan_eq3_flop,
    recompute_flop_per_sequence,
)
from planner.estimate import narayanan_eq4_days
from planner.presets import get_preset
from planner.specs import ModelSpec

EQ3_PRESETS = ["megatron-1.7b", "megatron-18.4b", "megatron-145.6b", "megatron-1t", "gpt3-175b"]


@pytest.mark.parametrize("preset", EQ3_PRESETS, ids=EQ3_PRESETS)
@pytest.mark.parametrize("batch", [1, 1536], ids=["B1", "B1536"])
def test_eq3_is_model_flop_plus_full_recompute(preset: str, batch: int) -> None:
    # Eq. 3: 96Bslh^2(1 + s/(6h) + V/(16lh)) = B * (3 forward + 1 recomputed forward of every layer),
    # counting the full s x s attention matrix (the paper's convention).
    m = get_preset(preset).model
    eq3 = narayanan_eq3_flop(batch, m.seq_length, m.num_layers, m.hidden_size, m.vocab_size)
    ours = batch * hardware_flop_per_sequence(m, FULL, full_attention=True)
    assert ours == pytest.approx(eq3, rel=1e-12)
    # Causal (today's convention): the s/(6h) term halves, to s/(12h).
    causal = (
        96
        * batch
        * m.seq_length
        * m.num_layers
        * m.hidden_size**2
        * (1 + m.seq_length / (12 * m.hidden_size) + m.vocab_size / (16 * m.num_layers * m.hidden_size))
    )
    assert batch * hardware_flop_per_sequence(m, FULL) == pytest.approx(causal, rel=1e-12)


def test_eq3_small_shape_by_hand() -> None:
    # B=2, s=6, l=1, h=3, V=8: 96*2*6*1*9 * (1 + 6/18 + 8/48) = 10368 * 1.5 = 15552
    assert narayanan_eq3_flop(2, 6, 1, 3, 8) == pytest.approx(15552.0, rel=1e-12)


GPT_SHAPES = [(2048, 4096, 32, 51200, 36), (8192, 4096, 32, 51200, 4), (2048, 12288, 96, 51200, 96)]


@pytest.mark.parametrize(("s", "h", "a", "v", "layers"), GPT_SHAPES, ids=["7.5B-shape", "long-seq", "gpt3-shape"])
def test_selective_recompute_ratio(s: int, h: int, a: int, v: int, layers: int) -> None:
    # Korthikanti 2022 App. A prints 1 + s/(3h) for hardware flop; the authors corrected it
    # (NVIDIA/Megatron-LM issue #523): the extra forward QK^T + AV is 4BLs^2h, i.e. 4/72 = s/(18h)
    # on top of s/(6h), so the bracket is 1 + 2s/(9h) + V/(12hL).
    m = ModelSpec(num_layers=layers, hidden_size=h, num_attention_heads=a, vocab_size=v, seq_length=s)
    model = model_flop_per_sequence(m, full_attention=True)
    hardware = hardware_flop_per_sequence(m, SELECTIVE, full_attention=True)
    expected = (1 + 2 * s / (9 * h) + v / (12 * h * layers)) / (1 + s / (6 * h) + v / (12 * h * layers))
    assert hardware / model == pytest.approx(expected, rel=1e-12)
    assert recompute_flop_per_sequence(m, NONE) == 0.0


def test_model_flop_per_sequence_by_hand() -> None:
    # l=1, h=4, a=2, s=2, V=5, ffn=16: per layer 24sh^2 + 4s^2h = 24*2*16 + 4*4*4 = 768 + 64 = 832;
    # logits 2shV = 2*2*4*5 = 80; 3 * (832 + 80) = 2736
    m = ModelSpec(num_layers=1, hidden_size=4, num_attention_heads=2, vocab_size=5, seq_length=2)
    assert model_flop_per_sequence(m, full_attention=True) == pytest.approx(2736.0, rel=1e-12)
    # Causal: the core is 2s^2h = 32, so 3 * (768 + 32 + 80) = 2640.
    assert model_flop_per_sequence(m) == pytest.approx(2640.0, rel=1e-12)


MEGATRON_SHAPES = {  # (layers, h, heads, groups, head_dim, ffn, vocab, s, gated)
    "llama3-8b-8k": (32, 4096, 32, 8, 128, 14336, 128256, 8192, True),
    "gpt-mha-2k": (24, 2048, 16, 16, 128, 8192, 51200, 2048, False),
    "llama3-8b-262k": (32, 4096, 32, 8, 128, 14336, 128256, 262144, True),
    # Qwen3-32B (config.json): 64 heads of 128 over hidden 5120, so q = 8192 != h.
    "qwen3-32b-kv-channels": (64, 5120, 64, 8, 128, 25600, 151936, 4096, True),
}


@pytest.mark.parametrize("shape", MEGATRON_SHAPES, ids=list(MEGATRON_SHAPES))
def test_model_flop_is_megatron_num_floating_point_operations(shape: str) -> None:
    # Megatron-LM megatron/training/training.py `num_floating_point_operations` (dense GQA branch), per token:
    # 3 * 2 * [l * (h (q + k + v) + q s / 2 * 2 + q h + ffn_mult * h * ffn) + h V], ffn_mult 3 gated else 2,
    # "causal mask (only half of the mask is non-zero)"; q = heads * kv_channels, k = v = groups * kv_channels.
    layers, h, a, g, d, ffn, v, s, gated = MEGATRON_SHAPES[shape]
    q, kv = a * d, g * d
    per_layer = h * (q + 2 * kv) + q * s / 2 * 2 + q * h + (3 if gated else 2) * h * ffn
    megatron = 3 * 2 * s * (layers * per_layer + h * v)
    m = ModelSpec(
        num_layers=layers, hidden_size=h, num_attention_heads=a, num_query_groups=g, head_dim=d,
        ffn_hidden_size=ffn, gated_mlp=gated, vocab_size=v, seq_length=s,
    )  # fmt: skip
    assert model_flop_per_sequence(m) == pytest.approx(megatron, rel=1e-12)
    assert recompute_flop_per_sequence(m, NONE) == 0.0


EQ4_ROWS = [
    # Narayanan 2021 Sec. 5.1: GPT-3 175B, 300B tokens, 1024 GPUs at 140 TFLOP/s: ~34 days.
    # 8 * 300e9 * 175e9 / (1024 * 140e12) / 86400 = 33.9
    (300e9, 175e9, 1024, 140e12, 33.5, 34.5),
    # 1T model, 450B tokens, 3072 GPUs at 163 TFLOP/s: ~84 days.
    # 8 * 450e9 * 1e12 / (3072 * 163e12) / 86400 = 83.2
    (450e9, 1e12, 3072, 163e12, 83.0, 84.5),
]


@pytest.mark.parametrize(("tokens", "params", "gpus", "rate", "lo", "hi"), EQ4_ROWS, ids=["gpt3-175b", "1t"])
def test_eq4_days(tokens: float, params: float, gpus: int, rate: float, lo: float, hi: float) -> None:
    assert lo <= narayanan_eq4_days(tokens, params, gpus, rate) <= hi
