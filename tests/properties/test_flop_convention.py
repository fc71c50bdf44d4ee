"""Hardware flop and time count the same work: hardware TFLOP/s per GPU never exceeds the peak.

Causal attention is counted as half the s x s matrix in flop (`gemms.attention_core_flop`), a sliding window
as its band, and in time alike (the fused kernel), so no estimate can pass the GPU's peak of its precision, at any
sequence length (up to 4,194,304, the largest allowed), for every preset and profile
(hypothesis, derandomized).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from planner.estimate import estimate
from planner.layout import Layout
from planner.presets import load_presets
from planner.profiles import ClusterSpec, load_profiles
from planner.specs import MAX_SEQ_LENGTH, Precision, Recompute, RuntimeFeatures, TrainingSpec
from planner.units import TERA

PROFILES = load_profiles()
PRESETS = load_presets()
SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SEQ_LENGTHS = st.one_of(
    st.sampled_from([2048, 8192, 131_072, 262_144, 1_048_576, MAX_SEQ_LENGTH]), st.integers(1, MAX_SEQ_LENGTH)
)


@SETTINGS
@given(
    preset=st.sampled_from(sorted(PRESETS)),
    profile_id=st.sampled_from(sorted(PROFILES)),
    precision=st.sampled_from(list(Precision)),
    seq_length=SEQ_LENGTHS,
    degrees=st.tuples(*(st.sampled_from([1, 2, 4, 8]) for _ in range(4))),
    ep=st.sampled_from([1, 2, 8]),
    micro_batch_size=st.sampled_from([1, 2]),
    microbatches=st.integers(1, 8),
    recompute=st.sampled_from(list(Recompute)),
    flash=st.booleans(),
    sp=st.booleans(),
    zero=st.integers(0, 3),
    window=st.one_of(st.none(), st.integers(1, MAX_SEQ_LENGTH)),
    pattern=st.one_of(st.none(), st.integers(2, 8)),
)
def test_hardware_tflops_never_exceed_the_peak(
    preset: str,
    profile_id: str,
    precision: Precision,
    seq_length: int,
    degrees: tuple[int, int, int, int],
    ep: int,
    micro_batch_size: int,
    microbatches: int,
    recompute: Recompute,
    flash: bool,
    sp: bool,
    zero: int,
    window: int | None,
    pattern: int | None,
) -> None:
    profile = PROFILES[profile_id]
    if getattr(profile.gpu.peak_tflops, precision.value) is None:
        return
    model = PRESETS[preset].model.model_copy(update={"seq_length": seq_length})
    if window is not None:  # any sliding window, every layer or all but every N-th (`gemms.windowed_fraction`)
        model = model.model_copy(update={"sliding_window": window, "sliding_window_pattern": pattern})
    tp, pp, dp, cp = degrees
    pp = min(pp, model.num_layers)
    layout = Layout(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        ep=ep if model.moe is not None else 1,
        micro_batch_size=micro_batch_size,
        recompute=recompute,
        sequence_parallel=sp,
        zero_stage=zero,
    )
    training = TrainingSpec(
        global_batch_size=dp * micro_batch_size * microbatches,
        precision=precision,
        runtime=RuntimeFeatures(flash_attention=flash),
    )
    cluster = ClusterSpec(profile=profile, num_gpus=tp * pp * dp * cp)
    result = estimate(model, cluster, training, layout)
    peak_tflops = profile.hardware(precision).peak_flop_per_s / TERA
    note(f"{result.hardware_tflops_per_gpu=} {peak_tflops=} {result.mfu=}")
    assert result.model_tflops_per_gpu <= result.hardware_tflops_per_gpu
    assert result.hardware_tflops_per_gpu <= peak_tflops
    assert result.mfu <= 1.0
