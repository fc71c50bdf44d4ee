"""Query/key normalisation (`ModelSpec.qk_layernorm`, Qwen3's q_norm / k_norm) against hand-computed numbers: the
norms' weights and where they live, the memory-bound pass they add, the inputs they keep, their kernels, and what
the import and the launches say about them.

A tiny GQA model: h 64, 4 query heads and 2 key/value groups of 16, so the norms pass over Q (64) and K (32) of
every token: `qk_norm_width` 96.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.costmodel import compute, host
from planner.costmodel.candidates import Candidates
from planner.costmodel.gemms import attention_gemms
from planner.costmodel.memory import activation_bytes_per_layer
from planner.costmodel.params import stage_kinds, stage_params, total_params
from planner.hf_config import model_from_hf_config
from planner.layout import Layout
from planner.numerics import training_numerics
from planner.presets import get_preset
from planner.specs import ModelSpec as Spec
from planner.specs import Recompute, RuntimeFeatures, TrainingSpec
from tests.costmodel.hardware import fabric_hardware

H, HEADS, GROUPS, D, S, V, FFN, LAYERS = 64, 4, 2, 16, 10, 32, 128, 3
PLAIN = Spec(
    num_layers=LAYERS,
    hidden_size=H,
    num_attention_heads=HEADS,
    num_query_groups=GROUPS,
    head_dim=D,
    ffn_hidden_size=FFN,
    vocab_size=V,
    seq_length=S,
    gated_mlp=True,
)
QK = PLAIN.model_copy(update={"qk_layernorm": True})
HW = fabric_hardware(8, 8)


def _candidates(tp: int, micro_batch: int = 1) -> Candidates:
    layout = Layout(tp=tp, pp=1, dp=1, micro_batch_size=micro_batch, recompute=Recompute.NONE)
    return Candidates.from_layouts([layout], num_layers=LAYERS, global_batch_size=micro_batch)


def test_the_norms_pass_over_q_and_k() -> None:
    assert QK.qk_norm_width == HEADS * D + GROUPS * D == 96
    assert PLAIN.qk_norm_width == 0


def test_two_head_wide_weights_per_layer_replicated_over_tp() -> None:
    """RMSNorm(head_dim) for the queries and one for the keys, shared by the heads: 2 x 16 per layer; with biases
    (linear_bias: LayerNorm) 2 x 2 x 16. Every tp rank holds them whole (Megatron-Core builds them per rank)."""
    assert total_params(QK) - total_params(PLAIN) == LAYERS * 2 * D
    biased, biased_qk = (m.model_copy(update={"linear_bias": True}) for m in (PLAIN, QK))
    assert total_params(biased_qk) - total_params(biased) == LAYERS * 2 * 2 * D
    c = _candidates(tp=2)
    plain = stage_params(PLAIN, c, stage_kinds(c)[0])
    qk = stage_params(QK, c, stage_kinds(c)[0])
    np.testing.assert_allclose(qk.dense - plain.dense, [LAYERS * 2 * D], rtol=0, atol=1e-9)


@pytest.mark.parametrize("tp", [1, 2])
def test_one_more_read_and_write_of_q_and_k_forward(tp: int) -> None:
    """4 bytes per element of Q and K (16-bit read and write), split by tp: 4 x 96 x 20 tokens / tp over 1 TB/s."""
    c = _candidates(tp, micro_batch=2)
    rt = RuntimeFeatures()
    delta = compute._elementwise_forward_s(QK, c, HW, rt) - compute._elementwise_forward_s(PLAIN, c, HW, rt)
    np.testing.assert_allclose(delta, [4 * 96 * 2 * S / tp / 1e12], rtol=1e-12)


def test_the_norm_inputs_are_kept_for_backward() -> None:
    """2 bytes per element of Q and K per token, split by tp; full recompute keeps only the layer input."""
    training = TrainingSpec(global_batch_size=2)
    num = training_numerics(training, HW)
    c = _candidates(tp=2, micro_batch=2)
    rt = RuntimeFeatures()
    delta = activation_bytes_per_layer(QK, c, rt, num) - activation_bytes_per_layer(PLAIN, c, rt, num)
    np.testing.assert_allclose(delta, [2 * 96 * 2 * S / 2], rtol=1e-12)
    full_layout = Layout(tp=2, pp=1, dp=1, recompute=Recompute.FULL)
    full = Candidates.from_layouts([full_layout], num_layers=LAYERS, global_batch_size=1)
    assert activation_bytes_per_layer(QK, full, rt, num)[0] == activation_bytes_per_layer(PLAIN, full, rt, num)[0]


def test_two_norm_kernels_each_way() -> None:
    c = _candidates(tp=1)
    plain, qk = (host.layer_kernels(m, c, RuntimeFeatures()) for m in (PLAIN, QK))
    np.testing.assert_array_equal(qk.forward - plain.forward, [2])
    np.testing.assert_array_equal(qk.backward - plain.backward, [2])


def test_mla_launches_a_kernel_per_latent_norm() -> None:
    """DeepSeek-V3's query and key/value latent norms, two kernels; DeepSeek-V2-Lite has no query latent, one."""
    deepseek = get_preset("deepseek-v3").model
    assert deepseek.mla is not None
    lite = deepseek.model_copy(update={"mla": deepseek.mla.model_copy(update={"q_lora_rank": None})})
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1)], num_layers=deepseek.num_layers, global_batch_size=1)
    full, fewer = (host.layer_kernels(m, c, RuntimeFeatures()) for m in (deepseek, lite))
    gemms = len(attention_gemms(deepseek)) - len(attention_gemms(lite))  # q_down and q_up become one q_proj
    assert gemms == 1
    np.testing.assert_array_equal(full.forward - fewer.forward, [gemms + 1])


def test_mla_keeps_its_latent_norms_whatever_the_flag() -> None:
    deepseek = get_preset("deepseek-v3").model
    assert deepseek.qk_norm_width == 0
    flagged = deepseek.model_copy(update={"qk_layernorm": True})
    assert total_params(flagged) == total_params(deepseek)


def test_qwen3_imports_and_presets_carry_the_norms() -> None:
    config = {
        "model_type": "qwen3",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 32,
        "max_position_embeddings": 10,
    }
    assert model_from_hf_config(config).qk_layernorm is True
    assert model_from_hf_config(config | {"model_type": "qwen2"}).qk_layernorm is False
    assert get_preset("qwen3-30b-a3b").model.qk_layernorm is True
    assert get_preset("qwen3-235b-a22b").model.qk_layernorm is True
    assert get_preset("llama3-8b").model.qk_layernorm is False
