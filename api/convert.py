"""Request schemas to planner specs, planner results to response schemas. No math."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ValidationError

from api.observation_schemas import ObservationOut, ObservationRequest, PredictedOut
from api.schemas import (
    AccuracyOut,
    BaselineOut,
    ClusterIn,
    DiagnosisOut,
    EstimateOut,
    EstimateRequest,
    EstimateResponse,
    FrameworkLaunchOut,
    HfConfigModel,
    LayoutIn,
    LayoutOut,
    ModelIn,
    ModelOut,
    PlanOut,
    PlanRequest,
    PlanResponse,
    PresetModel,
    SearchOut,
    ViolationOut,
)
from planner.calibration.accuracy import band_for
from planner.calibration.published import PublishedRun, gpu_kind_of
from planner.errors import InvalidSpecError, PlannerError, validator_message
from planner.estimate import Estimate, estimate, layout_modules
from planner.launch import LaunchInputs, launch_args
from planner.layout import Layout
from planner.observation import Measured, check_measured, relative_error
from planner.profiles import ClusterSpec, HardwareProfile, get_profile
from planner.resolved import ResolvedModel, resolve_hf, resolve_preset, resolve_shape
from planner.rules import LAYOUT_AXES, rule_set
from planner.search.plan import EQUIVALENT_WITHIN, Baseline, Plan, PlanResult, plan
from planner.specs import ModelSpec, TrainingSpec
from planner.store import Observation
from planner.validate import Violation

FRAMEWORKS = ("megatron", "torchtitan", "nemo")

__all__ = [
    "LaunchTarget",
    "answer_estimate",
    "answer_plan",
    "cluster_spec",
    "estimate_response",
    "layout_from",
    "observation_out",
    "observation_prediction",
    "observation_request",
    "observation_run",
    "plan_response",
    "resolve_model",
]


def resolve_model(model: ModelIn) -> ResolvedModel:
    """The model a request names, with the source of each value."""
    if isinstance(model, PresetModel):
        try:
            return resolve_preset(model.preset, model.seq_length)
        except PlannerError as exc:
            raise InvalidSpecError("model.preset", str(exc)) from None
    if isinstance(model, HfConfigModel):
        return resolve_hf(model.hf_config, model.seq_length)
    return resolve_shape(model)


def _model_out(resolved: ResolvedModel) -> ModelOut:
    return ModelOut(
        shape=resolved.model,
        total_params=resolved.total_params,
        active_params=resolved.active_params,
        sources=dict(resolved.sources),
    )


def _deep_merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _validated_profile(raw: dict[str, Any], field: str) -> HardwareProfile:
    try:
        return HardwareProfile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InvalidSpecError(f"{field}.{loc}" if loc else field, validator_message(first["msg"])) from None


def cluster_spec(cluster: ClusterIn, profiles: Mapping[str, HardwareProfile]) -> ClusterSpec:
    inline = {
        k: v
        for k, v in cluster.model_dump(exclude_none=True).items()
        if k not in ("num_gpus", "profile", "memory_headroom")
    }
    if cluster.profile is not None:
        if set(inline) - {"overrides"}:
            raise InvalidSpecError("cluster", "give either a profile id (with optional overrides) or an inline profile")
        try:
            base = get_profile(profiles, cluster.profile)
        except PlannerError as exc:
            raise InvalidSpecError("cluster.profile", str(exc)) from None
        profile = base
        if cluster.overrides:
            profile = _validated_profile(_deep_merge(base.model_dump(), cluster.overrides), "cluster.overrides")
        return ClusterSpec(profile=profile, num_gpus=cluster.num_gpus, memory_headroom=cluster.memory_headroom)
    if "overrides" in inline:
        raise InvalidSpecError("cluster.overrides", "overrides apply to a profile id; give cluster.profile")
    missing = [k for k in ("gpu", "node", "network") if k not in inline]
    if missing:
        raise InvalidSpecError(f"cluster.{missing[0]}", "an inline profile needs gpu, node and network")
    inline.setdefault("id", "inline")
    return ClusterSpec(
        profile=_validated_profile(inline, "cluster"),
        num_gpus=cluster.num_gpus,
        memory_headroom=cluster.memory_headroom,
    )


_LAYOUT_SIZES = (*LAYOUT_AXES, "recompute")
"""Fields the request layout, the planner's Layout and the response layout share by name."""


def layout_from(layout: LayoutIn) -> Layout:
    stages = tuple(layout.layers_per_stage) if layout.layers_per_stage else None
    sizes = {k: getattr(layout, k) for k in _LAYOUT_SIZES} | {"etp": layout.etp or 0}  # 0: Layout resolves it to tp
    modules = tuple(layout.recompute_modules) if layout.recompute_modules else None
    return Layout(**sizes, layers_per_stage=stages, recompute_modules=modules)


def _layout_out(layout: Layout, num_microbatches: int, model: ModelSpec, training: TrainingSpec) -> LayoutOut:
    stages = list(layout.layers_per_stage) if layout.layers_per_stage else None
    sizes = {k: getattr(layout, k) for k in _LAYOUT_SIZES}
    modules = layout_modules(model, training, layout)
    return LayoutOut(
        **sizes,
        num_microbatches=num_microbatches,
        layers_per_stage=stages,
        recompute_modules=None if modules is None else list(modules),
    )


def _check_finite(e: Estimate) -> None:
    """Refuse (422) an estimate that overflowed: rates within bounds but so small that a time is inf, not a number."""
    core = [e.step_time_s, e.tokens_per_s, e.model_tflops_per_gpu, e.hardware_tflops_per_gpu, e.mfu, e.bubble_fraction]
    core += [*e.time_breakdown_s.values(), e.memory.peak_gib, e.memory.capacity_gib, *e.memory.breakdown_gib.values()]
    core += [e.microbatch_forward_s, e.microbatch_backward_s]
    if not all(math.isfinite(x) for x in core):
        raise InvalidSpecError(
            "cluster", "the hardware's rates are too small for a finite estimate (a time overflows); check the profile"
        )
    if not all(math.isfinite(x) for x in (e.days_to_train, e.gpu_hours) if x is not None):
        raise InvalidSpecError("training.train_tokens", "days_to_train overflows on this hardware; give fewer tokens")


def _estimate_out(e: Estimate) -> EstimateOut:
    _check_finite(e)
    return EstimateOut(
        step_time_s=e.step_time_s,
        tokens_per_s=e.tokens_per_s,
        model_tflops_per_gpu=e.model_tflops_per_gpu,
        hardware_tflops_per_gpu=e.hardware_tflops_per_gpu,
        mfu=e.mfu,
        bubble_fraction=e.bubble_fraction,
        time_breakdown_s=e.time_breakdown_s,
        memory=asdict(e.memory),
        network=asdict(e.network),
        microbatch_forward_s=e.microbatch_forward_s,
        microbatch_backward_s=e.microbatch_backward_s,
        days_to_train=e.days_to_train,
        gpu_hours=e.gpu_hours,
    )


def _accuracy_out(cluster: ClusterSpec, model: ModelSpec, training: TrainingSpec) -> AccuracyOut | None:
    band = band_for(gpu_kind_of(cluster.profile.gpu.name), model, training)
    if band is None:
        return None
    return AccuracyOut(**asdict(band), text=band.text)


def _plan_out(p: Plan, model: ModelSpec, training: TrainingSpec, gpus_per_node: int, target: LaunchTarget) -> PlanOut:
    launch = launch_args(model, training, p.layout, p.num_gpus, gpus_per_node, target.inputs, target.versions)
    return PlanOut(
        rank=p.rank,
        num_gpus=p.num_gpus,
        equivalent=p.equivalent,
        layout=_layout_out(p.layout, p.estimate.num_microbatches, model, training),
        estimate=_estimate_out(p.estimate),
        launch={
            name: FrameworkLaunchOut(**asdict(getattr(launch, name))) for name in ("megatron", "torchtitan", "nemo")
        },
    )


@dataclass(frozen=True, slots=True)
class LaunchTarget:
    """What the launches are built for: the request's data and tokenizer, and the plan's framework release."""

    inputs: LaunchInputs | None = None
    versions: Mapping[str, str] = field(default_factory=dict)


def plan_response(
    result: PlanResult,
    resolved: ResolvedModel,
    training: TrainingSpec,
    cluster: ClusterSpec,
    target: LaunchTarget | None = None,
) -> PlanResponse:
    model = resolved.model
    target = target or LaunchTarget()
    per_node = cluster.profile.node.gpus_per_node
    d = result.diagnosis

    def baseline_out(base: Baseline) -> BaselineOut:
        return BaselineOut(
            rule=base.rule,
            plan=_plan_out(base.plan, model, training, per_node, target) if base.plan else None,
            speedup_of_best=base.speedup_of_best,
        )

    return PlanResponse(
        plans=[_plan_out(p, model, training, per_node, target) for p in result.plans],
        baseline=baseline_out(result.baseline),
        modern_baseline=baseline_out(result.modern_baseline),
        search=SearchOut(**asdict(result.search)),
        diagnosis=DiagnosisOut(
            message=d.message,
            least_memory_layout=_layout_out(
                d.least_memory_layout,
                d.least_memory_layout.num_microbatches(training.global_batch_size),
                model,
                training,
            )
            if d.least_memory_layout
            else None,
            least_memory_gib=d.least_memory_gib,
            capacity_gib=d.capacity_gib,
            relax=d.relax,
            legal_values=d.legal_values,
            more_gpus=d.more_gpus,
            min_gpu_memory_gib=d.min_gpu_memory_gib,
        )
        if d
        else None,
        idle_gpus=result.idle_gpus,
        idle_reason=result.idle_reason,
        memory_headroom=cluster.memory_headroom,
        equivalent_within=EQUIVALENT_WITHIN,
        accuracy=_accuracy_out(cluster, model, training),
        model=_model_out(resolved),
    )


def estimate_response(
    layout: Layout,
    requested: LayoutIn,
    e: Estimate,
    resolved: ResolvedModel,
    cluster: ClusterSpec,
    training: TrainingSpec,
) -> EstimateResponse:
    violations = list(e.violations)
    if requested.num_microbatches is not None and requested.num_microbatches != e.num_microbatches:
        violations.append(
            Violation(
                "num_microbatches",
                f"num_microbatches({requested.num_microbatches}) != global_batch_size / (micro_batch_size * dp)"
                f" = {e.num_microbatches}",
            )
        )
    return EstimateResponse(
        layout=_layout_out(layout, e.num_microbatches, resolved.model, training),
        estimate=_estimate_out(e),
        fits=not violations,
        violations=[ViolationOut(rule=v.rule, message=v.message) for v in violations],
        memory_headroom=cluster.memory_headroom,
        accuracy=_accuracy_out(cluster, resolved.model, training),
        model=_model_out(resolved),
    )


def answer_plan(request: PlanRequest, profiles: Mapping[str, HardwareProfile]) -> PlanResponse:
    """The body of POST /v1/plan for a validated request (the service and the command line both answer with it)."""
    resolved, cluster = resolve_model(request.model), cluster_spec(request.cluster, profiles)
    result = plan(
        resolved.model,
        cluster,
        request.training,
        request.constraints,
        request.top_k,
        request.objective,
        rules=rule_set(request.framework, request.framework_version),
        max_step_time_s=request.max_step_time_s,
    )
    versions = {request.framework.value: result.search.framework_version}
    return plan_response(result, resolved, request.training, cluster, LaunchTarget(request.launch, versions))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Estimated:
    resolved: ResolvedModel
    cluster: ClusterSpec
    estimate: Estimate
    response: EstimateResponse


def _estimated(request: EstimateRequest, profiles: Mapping[str, HardwareProfile]) -> _Estimated:
    resolved, cluster = resolve_model(request.model), cluster_spec(request.cluster, profiles)
    layout = layout_from(request.layout)
    rules = rule_set(request.framework, request.framework_version)
    e = estimate(resolved.model, cluster, request.training, layout, rules)
    response = estimate_response(layout, request.layout, e, resolved, cluster, request.training)
    return _Estimated(resolved=resolved, cluster=cluster, estimate=e, response=response)


def answer_estimate(request: EstimateRequest, profiles: Mapping[str, HardwareProfile]) -> EstimateResponse:
    """The body of POST /v1/estimate for a validated request."""
    return _estimated(request, profiles).response


def _measured(body: ObservationRequest) -> Measured:
    m = body.measured
    return Measured(step_time_s=m.step_time_s, peak_memory_gib=m.peak_memory_gib, tokens_per_s=m.tokens_per_s)


def observation_prediction(body: ObservationRequest, profiles: Mapping[str, HardwareProfile]) -> PredictedOut:
    """The prediction stored with an observation, after the checks a measured run must pass (422 otherwise):
    the request is a valid estimate request naming a profile id, its layout breaks no rule of its framework
    (only memory may be predicted over: the run measured it), and the measurement is physically possible."""
    if body.cluster.profile is None:
        raise InvalidSpecError("cluster.profile", "an observation names a profile id (with optional overrides)")
    found = _estimated(body, profiles)
    broken = [v for v in found.response.violations if v.rule != "fits_memory"]
    if broken:
        raise InvalidSpecError(
            "layout",
            f"{broken[0].rule}: {broken[0].message} (the {body.framework.value} rules refuse this layout, so no"
            " run of it can have been measured)",
        )
    check_measured(_measured(body), found.estimate, found.resolved.model, body.training, found.cluster.profile)
    e = found.response.estimate
    return PredictedOut(
        step_time_s=e.step_time_s,
        tokens_per_s=e.tokens_per_s,
        mfu=e.mfu,
        peak_memory_gib=e.memory.peak_gib,
        hardware_tflops_per_gpu=e.hardware_tflops_per_gpu,
    )


def observation_out(o: Observation) -> ObservationOut:
    """A stored observation as the API returns it, with predicted / measured - 1 per measured quantity."""
    predicted = PredictedOut.model_validate(o.predicted)
    measured = {k: float(v) for k, v in o.measured.items() if v is not None}
    error = {k: relative_error(getattr(predicted, k), v) for k, v in measured.items()}  # same names on both sides
    return ObservationOut(
        id=o.id,
        owner=o.owner,
        created_at=o.created_at,
        profile=o.profile_id,
        request=o.request,
        measured=measured,
        source=o.source,
        predicted=predicted,
        planner_version=o.planner_version,
        error=error,
    )


def observation_request(o: Observation) -> ObservationRequest:
    """A stored observation's request, validated again as it was on arrival (for `observation_run`)."""
    return ObservationRequest.model_validate_json(
        json.dumps({**o.request, "measured": o.measured, **({"source": o.source} if o.source else {})})
    )


def observation_run(
    body: ObservationRequest, profiles: Mapping[str, HardwareProfile], run_id: str = "observation"
) -> PublishedRun:
    """An observation as the calibration's run type (group "observations"), for the per-site fit.

    The profile's overrides are not carried: `PublishedRun.cluster(profile)` takes the profile the fit
    varies; an observation with overrides is fitted on its named profile."""
    resolved, cluster = resolve_model(body.model), cluster_spec(body.cluster, profiles)
    source = body.source
    return PublishedRun(
        id=run_id,
        group="observations",
        variant="",
        gpu_kind=gpu_kind_of(cluster.profile.gpu.name),
        model=resolved.model,
        training=body.training,
        layout=layout_from(body.layout),
        num_gpus=cluster.num_gpus,
        tflops_per_gpu=None,
        step_time_s=body.measured.step_time_s,
        source=source.file or source.note or f"observation ({source.kind.value})",
    )
