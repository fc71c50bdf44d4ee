"""NVFP4 as Transformer Engine runs it (precision nvfp4): the linear layers' GEMMs at the FP4 peak and the measured
NVFP4 kernel rate, behind their quantization passes; NVFP4 bytes for weights and saved inputs; Blackwell only."""

from dataclasses import replace

import numpy as np
import pytest

from planner.costmodel import compute
from planner.costmodel.candidates import Candidates
from planner.errors import InvalidSpecError
from planner.layout import Layout
from planner.numerics import numerics
from planner.profiles import NVFP4_GEMM_SPEEDUP, load_profiles
from planner.specs import AdamMoments, Fp8Recipe, ModelSpec, Precision, RuntimeFeatures, TrainingSpec
from planner.units import TERA
from tests.costmodel.test_fp8 import BF16, FP8, TINY

NVFP4 = replace(FP8, peak_flop_per_s=4e12, nvfp4=True)


def _one(layout: Layout, model: ModelSpec = TINY) -> Candidates:
    return Candidates.from_layouts([layout], model.num_layers, 8)


@pytest.mark.parametrize("profile_id", ["gb200-nvl72", "hgx-b200"])
def test_nvfp4_gemms_run_at_the_measured_rate_over_fp8(profile_id: str) -> None:
    # TE's B300 profile: NVFP4 kernels 6.812 / 3.764 = 1.81x the per-tensor FP8 ones, below the 2x of the peaks.
    profile = load_profiles()[profile_id]
    peaks = profile.gpu.peak_tflops
    assert peaks.nvfp4 == 2 * peaks.fp8  # type: ignore[operator]
    fp4, fp8 = profile.hardware(Precision.NVFP4), profile.hardware(Precision.FP8, Fp8Recipe.TENSORWISE)
    assert fp4.peak_flop_per_s == peaks.nvfp4 * TERA  # type: ignore[operator]
    assert fp4.gemm_peak_flop_per_s(False) == peaks.bf16 * TERA  # type: ignore[operator]
    ratio = fp4.gemm_peak_flop_per_s(True) / fp8.gemm_peak_flop_per_s(True)
    assert ratio == pytest.approx(6.812 / 3.764, rel=1e-12) and NVFP4_GEMM_SPEEDUP < 2
    assert fp4.quantized and fp4.nvfp4 and not fp8.nvfp4


@pytest.mark.parametrize("profile_id", ["dgx-h100", "hgx-h200", "dgx-a100-80gb", "mi300x"])
def test_nvfp4_needs_fp4_tensor_cores(profile_id: str) -> None:
    profile = load_profiles()[profile_id]
    with pytest.raises(InvalidSpecError, match=r"has no nvfp4 tensor cores") as err:
        profile.hardware(Precision.NVFP4)
    assert err.value.field == "training.precision"


def test_nvfp4_quantization_passes_by_hand() -> None:
    # tp = 2, T = 4: inputs 144 elements, output gradients 176 (test_fp8.test_cast_kernels_by_hand), each read for
    # the amax (2), read again (2) and written row- and column-wise in NVFP4 (2 x 0.5625): 5.125 bytes.
    c = _one(Layout(tp=2, pp=1, dp=1))
    fwd, bwd = compute.quantize_s(TINY, c, NVFP4)
    np.testing.assert_allclose([fwd[0], bwd[0]], [5.125 * 144 / 1e12, 5.125 * 176 / 1e12], rtol=1e-12)
    assert compute.quantize_s(TINY, c, BF16)[0][0] == 0.0


def test_nvfp4_linear_gemms_at_its_peak_the_rest_at_bf16() -> None:
    c = _one(Layout(tp=1, pp=1, dp=1))
    rt = RuntimeFeatures()
    np.testing.assert_allclose(
        compute._gemm_set_time_s(TINY, c, NVFP4, rt), compute._gemm_set_time_s(TINY, c, FP8, rt) / 2, rtol=1e-12
    )
    np.testing.assert_allclose(
        compute._attention_core_s(TINY, c, NVFP4, rt)[0], compute._attention_core_s(TINY, c, BF16, rt)[0], rtol=0
    )
    np.testing.assert_allclose(compute.logits_time_s(TINY, c, NVFP4), compute.logits_time_s(TINY, c, BF16), rtol=0)


@pytest.mark.parametrize(
    ("gather", "gather_bytes"),
    [(None, 0.5625), (True, 0.5625), (False, 2)],
)
def test_nvfp4_bytes(gather: bool | None, gather_bytes: float) -> None:
    num = numerics(Precision.NVFP4, fp8_param_gather=gather)
    assert num.saved_gemm_input_bytes == 0.5625  # the column-wise copy: 4 bits and one E4M3 scale per 16
    assert num.quantized_weight_bytes == 1.125  # row- and column-wise copies
    assert num.fp8_weight_gather_bytes == gather_bytes  # the row-wise data; the column-wise is its transpose
    assert (num.weight_bytes, num.gradient_bytes, num.master_weight_bytes) == (2, 4, 4)
    # Megatron-Core's precision-aware optimizer: no fp8_recipe under NVFP4, so TE keeps the 16-bit remainder.
    assert numerics(Precision.NVFP4, adam_moments=AdamMoments.BF16).master_weight_bytes == 2


def test_nvfp4_settings() -> None:
    assert TrainingSpec(global_batch_size=8, precision=Precision.NVFP4, fp8_param_gather=True).fp8_param_gather
    with pytest.raises(ValueError, match=r"fp8_recipe\(mxfp8\) applies to precision fp8; got precision\(nvfp4\)"):
        TrainingSpec.model_validate({"global_batch_size": 8, "precision": "nvfp4", "fp8_recipe": "mxfp8"})
