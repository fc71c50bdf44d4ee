"""FP8 as Transformer Engine runs it: the linear layers at the fp8 peak behind cast kernels, the
attention core, the output layer and the router at the bf16 peak."""

from dataclasses import replace

import numpy as np
import pytest

from planner.costmodel import compute
from planner.costmodel.candidates import Candidates
from planner.costmodel.gemms import GemmRole, layer_gemms, logits_gemm
from planner.errors import InvalidSpecError
from planner.layout import Layout
from planner.profiles import MXFP8_GEMM_RATE, Hardware, load_profiles
from planner.specs import AttentionKernel, Fp8Recipe, ModelSpec, MoESpec, Precision, RuntimeFeatures
from planner.units import TERA

BF16 = Hardware(
    peak_flop_per_s=1e12, hbm_bytes=1e9, hbm_bandwidth_bytes_per_s=1e12, gpus_per_node=8, nvlink_domain_gpus=8,
    nvlink_bytes_per_s=1e9, nic_bytes_per_s_per_gpu=1e9, nvlink_latency_s=0.0, network_latency_s=0.0,
    collective_base_latency_s=0.0, net_overhead_s=0.0,
    gemm_peak_efficiency=0.5, gemm_overhead_s=0.0, gemm_tile_m=1, gemm_tile_n=1,
)  # fmt: skip
# 1 x 1 tiles on one SM: no tile or wave quantisation, so a GEMM takes exactly its flop at eta * peak.
FP8 = replace(BF16, peak_flop_per_s=2e12, bf16_peak_flop_per_s=1e12)
# h=8, a=4 (MHA, kv = 8), ffn=32, not gated, s=4: one micro-batch of b=1 is T = 4 tokens.
TINY = ModelSpec(num_layers=2, hidden_size=8, num_attention_heads=4, ffn_hidden_size=32, vocab_size=10, seq_length=4)


def _one(layout: Layout) -> Candidates:
    return Candidates.from_layouts([layout], TINY.num_layers, 8)


def test_which_gemms_run_in_fp8() -> None:
    assert all(g.fp8 for g in layer_gemms(TINY))
    assert not logits_gemm(TINY).fp8
    moe = TINY.model_copy(update={"moe": MoESpec(num_experts=4, top_k=2, expert_ffn_hidden_size=8)})
    assert {g.role for g in layer_gemms(moe) if not g.fp8} == {GemmRole.ROUTER}


def test_fp8_linear_gemms_at_fp8_peak_the_rest_at_bf16() -> None:
    c = _one(Layout(tp=1, pp=1, dp=1))
    linear = sum(g.flop(4) for g in layer_gemms(TINY))
    np.testing.assert_allclose(
        compute._gemm_set_time_s(TINY, c, FP8, RuntimeFeatures()), [linear / (0.5 * 2e12)], rtol=1e-12
    )
    np.testing.assert_allclose(
        compute._gemm_set_time_s(TINY, c, BF16, RuntimeFeatures()), [linear / (0.5 * 1e12)], rtol=1e-12
    )
    # Attention core (causal 2 b s^2 h = 256, flash) and output layer (3 x 2 T h V = 1920) stay at the bf16 peak.
    core_fp8, _ = compute._attention_core_s(TINY, c, FP8, RuntimeFeatures())
    core_bf16, _ = compute._attention_core_s(TINY, c, BF16, RuntimeFeatures())
    np.testing.assert_allclose(core_fp8, core_bf16, rtol=0)
    np.testing.assert_allclose(core_fp8, [256 / 0.5e12], rtol=1e-12)
    loss_s = (38 + 14) * 4 * 10 / 1e12  # Megatron fp32 cross-entropy bytes (forward 38 + backward 14) x T V
    np.testing.assert_allclose(compute.logits_time_s(TINY, c, FP8), [1920 / 0.5e12 + loss_s], rtol=1e-12)


def test_cast_kernels_by_hand() -> None:
    # tp = 2, T = 4. Inputs per GPU: qkv 4*8, proj 4*8/2, fc1 4*8, fc2 4*32/2 = 144 elements;
    # output gradients: qkv 4*24/2, proj 4*8, fc1 4*32/2, fc2 4*8 = 176; 4 bytes each over 1e12 B/s.
    c = _one(Layout(tp=2, pp=1, dp=1))
    fwd, bwd = compute.quantize_s(TINY, c, FP8)
    np.testing.assert_allclose([fwd[0], bwd[0]], [4 * 144 / 1e12, 4 * 176 / 1e12], rtol=1e-12)
    assert compute.quantize_s(TINY, c, BF16)[0][0] == 0.0
    # A GPU a million times slower, so the layer is GPU-bound (far above the host's launch floor).
    slow_bf16 = replace(BF16, peak_flop_per_s=1e6, hbm_bandwidth_bytes_per_s=1e6)
    slow_fp8 = replace(slow_bf16, peak_flop_per_s=2e6, bf16_peak_flop_per_s=1e6)
    fwd, bwd = compute.quantize_s(TINY, c, slow_fp8)
    bf16, fp8 = (
        compute.layer_times(TINY, c, slow_bf16, RuntimeFeatures()),
        compute.layer_times(TINY, c, slow_fp8, RuntimeFeatures()),
    )
    gemm_saved = compute._gemm_set_time_s(TINY, c, slow_bf16, RuntimeFeatures()) - compute._gemm_set_time_s(
        TINY, c, slow_fp8, RuntimeFeatures()
    )
    np.testing.assert_allclose(bf16.forward_s - fp8.forward_s, gemm_saved - fwd, rtol=1e-12)
    np.testing.assert_allclose(bf16.backward_s - fp8.backward_s, 2 * gemm_saved - bwd, rtol=1e-12)


@pytest.mark.parametrize("profile_id", ["dgx-h100", "hgx-b200"])
def test_profile_resolves_both_peaks_for_fp8(profile_id: str) -> None:
    profile = load_profiles()[profile_id]
    hw = profile.hardware(Precision.FP8)
    assert profile.gpu.peak_tflops.fp8 is not None and profile.gpu.peak_tflops.bf16 is not None
    assert hw.peak_flop_per_s == profile.gpu.peak_tflops.fp8 * TERA
    assert hw.gemm_peak_flop_per_s(False) == profile.gpu.peak_tflops.bf16 * TERA
    assert profile.hardware(Precision.BF16).bf16_peak_flop_per_s is None
    assert not profile.hardware(Precision.BF16).quantized and hw.quantized


def test_fused_attention_at_its_published_rate() -> None:
    # Causal core of TINY at b = 4: 256 flop forward, 2.5 x 256 backward; at 100 / 50 flop/s published.
    from dataclasses import replace as _replace

    c = _one(Layout(tp=1, pp=1, dp=1))
    hw = _replace(BF16, fused_attention_flop_per_s=(100.0, 50.0))
    fwd, bwd = compute._attention_core_s(TINY, c, hw, RuntimeFeatures())
    np.testing.assert_allclose([fwd[0], bwd[0]], [256 / 100.0, 2.5 * 256 / 50.0], rtol=1e-12)


def test_the_runtime_picks_the_attention_kernel_and_its_rate() -> None:
    # The same 256 flop core: cuDNN at 100 / 50 flop/s, FlashAttention-2 at 40 / 20 flop/s.
    c = _one(Layout(tp=1, pp=1, dp=1))
    hw = replace(BF16, fused_attention_flop_per_s=(100.0, 50.0), flash2_attention_flop_per_s=(40.0, 20.0))
    fwd, bwd = compute._attention_core_s(TINY, c, hw, RuntimeFeatures(attention_kernel=AttentionKernel.FLASH2))
    np.testing.assert_allclose([fwd[0], bwd[0]], [256 / 40.0, 2.5 * 256 / 20.0], rtol=1e-12)
    fwd, bwd = compute._attention_core_s(TINY, c, hw, RuntimeFeatures())  # cudnn by default
    np.testing.assert_allclose([fwd[0], bwd[0]], [256 / 100.0, 2.5 * 256 / 50.0], rtol=1e-12)
    # FlashAttention v1 at its own rate, 20 / 8 flop/s.
    with_v1 = replace(hw, flash1_attention_flop_per_s=(20.0, 8.0))
    fwd, bwd = compute._attention_core_s(TINY, c, with_v1, RuntimeFeatures(attention_kernel=AttentionKernel.FLASH1))
    np.testing.assert_allclose([fwd[0], bwd[0]], [256 / 20.0, 2.5 * 256 / 8.0], rtol=1e-12)
    # A kernel the profile has no rate for runs like a GEMM at the bf16 peak, as with no rate at all.
    bare = replace(BF16, fused_attention_flop_per_s=(100.0, 50.0))
    flash2 = compute._attention_core_s(TINY, c, bare, RuntimeFeatures(attention_kernel=AttentionKernel.FLASH2))
    gemm_like = compute._attention_core_s(TINY, c, BF16, RuntimeFeatures())
    np.testing.assert_allclose(np.ravel(flash2), np.ravel(gemm_like), rtol=1e-12)


def test_the_h100_profile_carries_both_published_kernels() -> None:
    hw = load_profiles()["dgx-h100"].hardware(Precision.BF16)
    assert hw.fused_attention_flop_per_s == (609 * TERA, 499 * TERA)  # cuDNN, FlashAttention-3 paper Figs. 5-6
    assert hw.flash2_attention_flop_per_s == (368 * TERA, 310 * TERA)  # FlashAttention-2, the same charts
    assert hw.flash1_attention_flop_per_s == (184 * TERA, 155 * TERA)  # half of FlashAttention-2's (profile source)


def test_the_a100_flash1_rate_is_the_middle_of_the_published_fractions_of_peak() -> None:
    # FlashAttention-2 paper Sec. 1: v1 forward 30-50% and backward 25-35% of the A100's 312 TFLOP/s.
    for profile_id in ("dgx-a100-80gb", "dgx-a100-40gb"):
        hw = load_profiles()[profile_id].hardware(Precision.BF16)
        assert hw.flash1_attention_flop_per_s is not None
        forward, backward = hw.flash1_attention_flop_per_s
        assert forward == pytest.approx(0.40 * 312 * TERA) and backward == pytest.approx(0.30 * 312 * TERA)
        # fwd + bwd (backward 2.5x the flop) inside the abstract's 25-40% of peak
        combined = 3.5 / (1 / forward + 2.5 / backward)
        assert 0.25 * 312 * TERA <= combined <= 0.40 * 312 * TERA


def test_a100_runs_flashattention_2_for_either_kernel() -> None:
    # The middle of FlashAttention-2's 50-73% of the A100's peak, forward + backward, split as on H100; TE's cudnn
    # choice runs FlashAttention-2 below compute capability 9.0, so both kernels price alike there.
    for profile_id in ("dgx-a100-80gb", "dgx-a100-40gb"):
        hw = load_profiles()[profile_id].hardware(Precision.BF16)
        assert hw.flash2_attention_flop_per_s == hw.fused_attention_flop_per_s == (217.5 * TERA, 183.2 * TERA)
        forward, backward = hw.flash2_attention_flop_per_s
        assert 3.5 / (1 / forward + 2.5 / backward) == pytest.approx(0.615 * 312 * TERA, rel=1e-3)
        assert forward / backward == pytest.approx(368 / 310, rel=1e-3)


def test_mxfp8_runs_the_linear_gemms_at_its_kernel_rate_and_nothing_else_slower() -> None:
    """MXFP8's fp8 GEMMs at `MXFP8_GEMM_RATE` of per-tensor FP8's (TE's profiling guide: 6.812 / 7.161 ms per
    layer on B300); its bf16 GEMMs (attention core, output layer) and a bf16 run keep their peaks; a GPU without
    MXFP8 tensor cores refuses the recipe."""
    assert MXFP8_GEMM_RATE == pytest.approx(0.9513, abs=1e-4)
    gb200 = load_profiles()["gb200-nvl72"]
    mx = gb200.hardware(Precision.FP8, Fp8Recipe.MXFP8)
    cs = gb200.hardware(Precision.FP8, Fp8Recipe.TENSORWISE)
    assert mx.gemm_peak_flop_per_s(True) == pytest.approx(cs.gemm_peak_flop_per_s(True) * MXFP8_GEMM_RATE)
    assert mx.gemm_peak_flop_per_s(False) == cs.gemm_peak_flop_per_s(False) == cs.bf16_peak_flop_per_s
    assert gb200.hardware(Precision.FP8, Fp8Recipe.DELAYED).fp8_gemm_rate == 1.0
    assert gb200.hardware(Precision.BF16).gemm_peak_flop_per_s(True) == gb200.gpu.peak_tflops.bf16 * TERA
    flop = 1e12  # a large GEMM: time is flop / (eta * rate), overhead aside
    ratio = (compute.tensor_core_time_s(flop, mx) - mx.gemm_overhead_s) / (
        compute.tensor_core_time_s(flop, cs) - cs.gemm_overhead_s
    )
    assert float(ratio) == pytest.approx(1 / MXFP8_GEMM_RATE)
    with pytest.raises(InvalidSpecError, match="fp8_recipe"):
        load_profiles()["dgx-h100"].hardware(Precision.FP8, Fp8Recipe.MXFP8)


def test_blockwise_runs_as_mxfp8_on_blackwell_and_at_the_per_tensor_rate_on_hopper() -> None:
    """Transformer Engine emulates the blockwise recipe with MXFP8 on Blackwell (its GEMMs at `MXFP8_GEMM_RATE`);
    on Hopper cuBLAS's block-scaled FP8 kernels run at the measured FP8 speed-up, like per-tensor scaling."""
    profiles = load_profiles()
    for blackwell in ("gb200-nvl72", "hgx-b200"):
        block = profiles[blackwell].hardware(Precision.FP8, Fp8Recipe.BLOCKWISE)
        assert block.fp8_gemm_rate == profiles[blackwell].hardware(Precision.FP8, Fp8Recipe.MXFP8).fp8_gemm_rate
    for hopper in ("dgx-h100", "hgx-h200"):
        block = profiles[hopper].hardware(Precision.FP8, Fp8Recipe.BLOCKWISE)
        assert block.fp8_gemm_rate == profiles[hopper].hardware(Precision.FP8, Fp8Recipe.TENSORWISE).fp8_gemm_rate


def test_hopper_fp8_gemms_run_at_the_measured_speed_up_over_bf16() -> None:
    """H100 states a measured 1.75x for large FP8 GEMMs over bf16 (`gpu.fp8_gemm_speedup`, cuBLAS 12.9): at the same
    eta a large FP8 GEMM then takes 1/1.75 of the bf16 one's time, not the peaks' 1/2; bf16 runs and the GEMMs an
    FP8 run keeps in bf16 are untouched; a profile without the figure runs FP8 at the peaks' ratio."""
    h100 = load_profiles()["dgx-h100"]
    assert h100.gpu.fp8_gemm_speedup == 1.75
    fp8, bf16 = h100.hardware(Precision.FP8, Fp8Recipe.DELAYED), h100.hardware(Precision.BF16)
    assert fp8.fp8_gemm_rate == pytest.approx(1.75 * 989 / 1979)
    assert bf16.fp8_gemm_rate == 1.0
    assert fp8.gemm_peak_flop_per_s(True) == pytest.approx(1.75 * 989 * TERA)
    assert fp8.gemm_peak_flop_per_s(False) == bf16.gemm_peak_flop_per_s(True) == 989 * TERA
    flop = 1e12
    ratio = (compute.tensor_core_time_s(flop, bf16) - bf16.gemm_overhead_s) / (
        compute.tensor_core_time_s(flop, fp8) - fp8.gemm_overhead_s
    )
    assert float(ratio) == pytest.approx(1.75)
    gb200 = load_profiles()["gb200-nvl72"]
    assert gb200.gpu.fp8_gemm_speedup is None and gb200.gpu.peak_tflops.fp8 is not None
    assert gb200.hardware(Precision.FP8, Fp8Recipe.DELAYED).gemm_peak_flop_per_s(True) == pytest.approx(
        gb200.gpu.peak_tflops.fp8 * TERA
    )
