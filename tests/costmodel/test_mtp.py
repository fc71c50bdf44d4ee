"""Multi-token prediction (`ModelSpec.mtp_num_layers`) against hand-computed numbers: the last stage's extra
parameters, model flop, seconds per micro-batch and kept logits (DeepSeek-V3 report, arXiv 2412.19437, Sec. 2.2;
Megatron-Core's MultiTokenPredictionBlock on the last stage)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.costmodel import compute
from planner.costmodel.candidates import Candidates
from planner.costmodel.flops import layer_forward_flop, logits_flop, model_flop_per_sequence
from planner.costmodel.params import StageKind, stage_kinds, stage_params, total_params
from planner.costmodel.shared import layer_quantities
from planner.layout import Layout
from planner.specs import ModelSpec, TrainingSpec
from tests.costmodel.hardware import fabric_hardware

H, S, V = 64, 16, 32
BASE = ModelSpec(num_layers=4, hidden_size=H, num_attention_heads=4, vocab_size=V, seq_length=S)
MTP = BASE.model_copy(update={"mtp_num_layers": 1})
HW = fabric_hardware(8, 8)
LAYER = 12 * H * H + 2 * H  # a GPT layer's four matrices (4h MLP) and its two RMSNorms, no biases


def _candidates(pp: int) -> Candidates:
    return Candidates.from_layouts([Layout(tp=1, pp=pp, dp=1)], num_layers=4, global_batch_size=1)


def test_the_last_stage_holds_the_mtp_module_and_an_embedding_copy() -> None:
    """At pp 2 the last stage gains one layer, eh_proj (2h x h), three norms and, the embedding being untied and on
    the first stage, its own V x h copy for the next tokens; a tied one is there already as the output layer."""
    c = _candidates(2)
    last = stage_kinds(c)[StageKind.LAST]
    extra = stage_params(MTP, c, last).dense - stage_params(BASE, c, last).dense
    assert LAYER == total_params(BASE.model_copy(update={"num_layers": 5})) - total_params(BASE)
    assert extra[0] == LAYER + 2 * H * H + 3 * H + V * H
    tied = {"tied_embeddings": True}
    extra_tied = (
        stage_params(MTP.model_copy(update=tied), c, last).dense
        - stage_params(BASE.model_copy(update=tied), c, last).dense
    )
    assert extra_tied[0] == LAYER + 2 * H * H + 3 * H
    assert total_params(MTP) - total_params(BASE) == LAYER + 2 * H * H + 3 * H  # the embedding and head are shared


def test_model_flop_counts_the_module_as_megatron_does() -> None:
    """3 x (one more layer + one more logit layer + eh_proj's 2 s (2h) h) per sequence (Megatron-LM
    `num_floating_point_operations`: the MTP layers with the decoder's, "(1 + mtp_num_layers)" logits)."""
    extra = 3 * (layer_forward_flop(BASE, 1) + logits_flop(BASE, 1) + 2 * S * 2 * H * H)
    assert model_flop_per_sequence(MTP) - model_flop_per_sequence(BASE) == pytest.approx(extra)


def test_the_last_stage_spends_a_layer_an_output_layer_and_eh_proj_more() -> None:
    c = _candidates(2)
    training = TrainingSpec(global_batch_size=1)
    base, mtp = (layer_quantities(m, training, c, HW) for m in (BASE, MTP))
    layer = base.layer_s.critical_path_s
    logits = compute.logits_time_s(BASE, c, HW)
    proj = compute.mtp_projection_time_s(BASE, c, HW)
    np.testing.assert_allclose(mtp.logits_s, base.logits_s + layer + logits + proj)
    np.testing.assert_allclose(base.logits_s, logits)
    assert proj[0] > 0
