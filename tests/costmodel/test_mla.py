"""Multi-latent attention against hand-computed numbers: the projections, their flop and parameters, the attention
core's widths, what tensor parallelism splits and what it replicates, the activations kept, and the input rules.

A tiny MLA model: h 64, 4 heads, query latent 16, key/value latent 8, per-head widths qk 8 + RoPE 4 and v 6.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner.costmodel.candidates import NONE, Candidates
from planner.costmodel.flops import layer_forward_flop, model_flop_per_sequence
from planner.costmodel.gemms import GemmRole, attention_core_flop, attention_gemms, attention_score_flop
from planner.costmodel.memory import activation_bytes_per_layer
from planner.costmodel.params import active_params, attention_params, stage_kinds, stage_params, total_params
from planner.layout import Layout
from planner.numerics import training_numerics
from planner.presets import get_preset
from planner.specs import MLASpec, ModelSpec, RuntimeFeatures, TrainingSpec
from tests.costmodel.hardware import fabric_hardware

H, HEADS, S, V, FFN = 64, 4, 10, 32, 128
MLA = MLASpec(q_lora_rank=16, kv_lora_rank=8, qk_head_dim=8, qk_pos_emb_head_dim=4, v_head_dim=6)
TINY = ModelSpec(
    num_layers=1, hidden_size=H, num_attention_heads=HEADS, ffn_hidden_size=FFN, vocab_size=V, seq_length=S, mla=MLA
)


HW = fabric_hardware(8, 8)


def _candidates(tp: int) -> Candidates:
    return Candidates.from_layouts([Layout(tp=tp, pp=1, dp=1)], num_layers=1, global_batch_size=1)


def test_mla_projections_by_hand() -> None:
    """DeepSeek-V2 Sec. 2.1: q_down h -> 16, q_up 16 -> 4 x (8 + 4), kv_down h -> 8 + 4, kv_up 8 -> 4 x (8 + 6),
    proj 4 x 6 -> h; the two down-projections are replicated over tp, the rest split."""
    got = [(g.name, g.role, g.k, g.n, g.tp_split) for g in attention_gemms(TINY)]
    assert got == [
        ("q_down", GemmRole.LATENT, 64, 16, False),
        ("q_up", GemmRole.ATTENTION, 16, 48, True),
        ("kv_down", GemmRole.LATENT, 64, 12, False),
        ("kv_up", GemmRole.ATTENTION, 8, 56, True),
        ("proj", GemmRole.ATTENTION, 24, 64, True),
    ]
    # 1024 + 768 + 768 + 448 + 1536: Megatron-LM's MLA multiply-adds per token (`num_floating_point_operations`:
    # q_lora (h + heads (qk + rope)) + kv_lora (h + heads (qk + v)) + h rope + heads v h), less its "+1" norm terms.
    assert attention_params(TINY) == 4544
    assert layer_forward_flop(TINY, 1) == pytest.approx(2 * S * (4544 + 2 * H * FFN) + attention_core_flop(TINY, 1))


def test_mla_core_counts_its_own_head_widths() -> None:
    """QK^T over d_qk = 12 and AV over d_v = 6: 2 s^2 heads (12 + 6) = 14,400 over the full matrix, half causal
    (Megatron-LM: heads (qk + rope) / 2 + heads v / 2 multiply-adds per token pair)."""
    assert attention_score_flop(TINY, 1) == 2 * S**2 * HEADS * (12 + 6) == 14_400
    assert attention_core_flop(TINY, 1) == 7_200
    gpt = ModelSpec(num_layers=1, hidden_size=H, num_attention_heads=HEADS, vocab_size=V, seq_length=S)
    assert attention_score_flop(gpt, 1) == 4 * S**2 * H  # Narayanan Eq. 3's 4 b s^2 h, unchanged without MLA


def test_tensor_parallelism_replicates_the_down_projections() -> None:
    """At tp 2 a GPU holds half the split weights (q_up, kv_up, proj, MLP) and all of the down-projections
    (1024 + 768) and the latent norms (16 + 8), besides the two layer norms, the embedding and output halves."""
    one, two = (stage_params(TINY, _candidates(tp), stage_kinds(_candidates(tp))[0]) for tp in (1, 2))
    split = 768 + 448 + 1536 + 2 * H * FFN
    replicated = 1024 + 768 + 16 + 8 + 2 * H
    edges = 2 * V * H  # embedding and output layer, split over tp
    assert one.dense[0] == split + replicated + edges + H  # + final norm
    assert two.dense[0] == split / 2 + replicated + edges / 2 + H
    assert total_params(TINY) == one.dense[0]


def test_deepseek_v3_is_671b_total_and_37b_active() -> None:
    """DeepSeek-V3 Technical Report (arXiv 2412.19437) abstract: 671B total parameters, 37B activated per token
    (the 14B multi-token-prediction module apart, which the preset trains: `mtp_num_layers` 1)."""
    preset = get_preset("deepseek-v3").model
    assert preset.mtp_num_layers == 1
    model = preset.model_copy(update={"mtp_num_layers": 0})
    assert total_params(model) == pytest.approx(671e9, rel=1e-3)
    assert active_params(model) == pytest.approx(37e9, rel=0.02)
    assert (model.head_dim, model.query_width, model.key_value_width) == (128, 128 * 192, 128 * (192 + 128))


def test_mla_activations_by_hand() -> None:
    """One layer's kept tensors per token at tp 1 (bf16, flash attention, no recompute): the norms' inputs and the
    down-projection / fc1 inputs (4 x 2h, plus two dropout masks), the two latents before and after their norms
    (2 x 2 x (16 + 8)) and the shared RoPE key (2 x 4), Q (2 x 48), K and V (2 x (48 + 24)), the attention output
    (2 x 24) and the MLP's GeLU input and output (2 x 2 x 128)."""
    c = _candidates(1)
    num = training_numerics(TrainingSpec(global_batch_size=1), HW)
    assert (num.activation_bytes, num.saved_gemm_input_bytes, num.gemm_input_copy_bytes) == (2, 2, 0)
    per_token = (8 + 2 * num.hidden_dropout_mask_bytes) * H + 4 * 24 + 2 * 4 + 2 * 48 + 2 * 72 + 2 * 24 + 4 * FFN
    got = activation_bytes_per_layer(TINY, c, RuntimeFeatures(), num)
    assert c.recompute[0] == NONE
    assert got[0] == S * per_token


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"head_dim": 8}, "head_dim(8) must equal mla.v_head_dim(6)"),
        ({"num_query_groups": 2}, "num_query_groups(2) must equal num_attention_heads(4)"),
        ({"mla": {"kv_lora_rank": 8, "qk_head_dim": 8, "qk_pos_emb_head_dim": 4, "v_head_dim": 0}}, "v_head_dim"),
    ],
)
def test_mla_input_rules(fields: dict[str, object], message: str) -> None:
    base = TINY.model_dump(exclude={"head_dim"})
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ModelSpec.model_validate(base | fields)


def test_head_dim_defaults_to_the_value_head_width() -> None:
    assert TINY.head_dim == 6 and "head_dim" not in TINY.model_fields_set
    assert TINY.attention_hidden_size == 24 and TINY.query_key_head_dim == 12
    assert model_flop_per_sequence(TINY) > 0
