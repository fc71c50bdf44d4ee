"""The paper's figure findings as checks the cost model must reproduce (Narayanan 2021 Sec. 5).

Each check builds the figure's configurations, predicts them, and states
whether the published finding holds. None of these runs is used by the fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner.calibration.fit import predict
from planner.calibration.published import RUNTIME_2021, PublishedRun, gpu_kind_of
from planner.layout import Layout
from planner.profiles import HardwareProfile
from planner.specs import ModelSpec, Precision, Recompute, RuntimeFeatures, TrainingSpec

__all__ = ["FIGURE_CHECKS", "FigureCheck", "run_figure_checks"]

_RUNTIME = RuntimeFeatures(**RUNTIME_2021 | {"overlap_grad_reduce": False})


@dataclass(frozen=True, slots=True)
class FigureCheck:
    figure: str
    finding: str
    holds: bool
    detail: str


def _gpt(name: str, layers: int, hidden: int, heads: int) -> ModelSpec:
    """A GPT-3 style shape (MHA, 4h MLP: the defaulted fields' defaults), as Narayanan 2021's figures train."""
    return ModelSpec.model_validate(
        {
            "name": name,
            "num_layers": layers,
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "vocab_size": 51200,
            "seq_length": 2048,
            "tied_embeddings": True,
            "linear_bias": True,
            "learned_position_embeddings": True,
        }
    )


def _tflops(model: ModelSpec, batch: int, layout: Layout, profile: HardwareProfile) -> float:
    run = PublishedRun(
        id="figure",
        group="figure",
        variant="",
        gpu_kind=gpu_kind_of(profile.gpu.name),
        model=model,
        layout=layout,
        num_gpus=layout.world_size,
        training=TrainingSpec(global_batch_size=batch, precision=Precision.FP16, runtime=_RUNTIME),
        tflops_per_gpu=None,
        step_time_s=None,
        source="",
    )
    return predict(run, profile)[0]


def _fig13(profile: HardwareProfile) -> FigureCheck:
    model = _gpt("GPT 162.2B", 32, 20480, 128)
    splits = [(2, 32), (4, 16), (8, 8), (16, 4), (32, 2)]
    tf = {s: _tflops(model, 128, Layout(tp=s[1], pp=s[0], dp=1, recompute=Recompute.FULL), profile) for s in splits}
    best = max(tf, key=lambda s: tf[s])
    detail = ", ".join(f"(pp={p},tp={t}): {v:.0f}" for (p, t), v in tf.items())
    return FigureCheck("Fig. 13", "162B on 64 GPUs, batch 128: (pp, tp) = (8, 8) is fastest", best == (8, 8), detail)


def _fig14(profile: HardwareProfile) -> FigureCheck:
    model = _gpt("GPT 5.9B", 32, 3840, 32)
    pps = [2, 4, 8, 16, 32]
    rows = {}
    for batch in (32, 128, 512):
        rows[batch] = [
            _tflops(model, batch, Layout(tp=1, pp=p, dp=64 // p, recompute=Recompute.FULL), profile) for p in pps
        ]
    big = rows[512]
    holds = all(a > b for a, b in zip(big, big[1:], strict=False)) and all(r[-1] < r[0] for r in rows.values())
    detail = "; ".join(
        f"B={b}: " + ", ".join(f"pp={p}: {v:.0f}" for p, v in zip(pps, r, strict=True)) for b, r in rows.items()
    )
    finding = "5.9B at tp = 1 on 64 GPUs: throughput falls as pp grows (monotone at batch 512, pp=32 < pp=2 at all)"
    return FigureCheck("Fig. 14", finding, holds, detail)


def _fig12(profile: HardwareProfile) -> FigureCheck:
    model = _gpt("GPT-3 175B", 96, 12288, 96)
    gains = []
    for batch in (12, 24, 36, 48, 60):
        plain = _tflops(model, batch, Layout(tp=8, pp=12, dp=1, recompute=Recompute.FULL), profile)
        inter = _tflops(model, batch, Layout(tp=8, pp=12, dp=1, vp=4, recompute=Recompute.FULL), profile)
        gains.append(inter / plain - 1)
    shrinking = all(a > b for a, b in zip(gains, gains[1:], strict=False)) and gains[0] > 0
    detail = ", ".join(f"B={b}: +{g:.0%}" for b, g in zip((12, 24, 36, 48, 60), gains, strict=True))
    return FigureCheck("Fig. 12", "175B on 96 GPUs: interleaving helps most at small batch", shrinking, detail)


def _fig16(profile: HardwareProfile) -> FigureCheck:
    model = _gpt("GPT 91B", 32, 15360, 128)
    mbs = [1, 2, 4, 8]
    tf = {
        b: _tflops(model, 128, Layout(tp=8, pp=8, dp=1, micro_batch_size=b, recompute=Recompute.FULL), profile)
        for b in mbs
    }
    best = max(tf, key=lambda b: tf[b])
    detail = ", ".join(f"b={b}: {v:.0f}" for b, v in tf.items())
    return FigureCheck("Fig. 16", "91B, (t, p) = (8, 8), batch 128: best micro-batch is 1 or 2", best in (1, 2), detail)


FIGURE_CHECKS: tuple[Callable[[HardwareProfile], FigureCheck], ...] = (_fig12, _fig13, _fig14, _fig16)


def run_figure_checks(profile: HardwareProfile) -> list[FigureCheck]:
    return [check(profile) for check in FIGURE_CHECKS]
