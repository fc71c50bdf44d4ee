"""Training-log import: a Megatron-LM, Megatron-Bridge (NeMo 2) or TorchTitan log in, observation bodies out.

Pure: text in, `Observation` out; `Observation.body()` is the body of `POST /v1/observations`. Every recovered
run is checked against the planner's layout rules for its framework, so a body validates as an estimate request.
"""

from __future__ import annotations

import dataclasses
import re

from pydantic import ValidationError

from planner.errors import InvalidSpecError, validator_message
from planner.layout import Layout
from planner.observe.bridge import CONFIG_START, parse_bridge
from planner.observe.megatron import ARGS_START, parse_megatron
from planner.observe.observation import LogFormat, Observation, StepTiming, log_lines, refuse
from planner.observe.timing import MIN_INTERVALS, WARMUP_FRACTION, Interval, steady_state
from planner.observe.torchtitan import MESH, parse_torchtitan
from planner.profiles import PROFILE_ID_PATTERN
from planner.rules import rule_set
from planner.specs import ModelSpec, Recompute, TrainingSpec
from planner.validate import layout_violations

__all__ = [
    "MIN_INTERVALS",
    "WARMUP_FRACTION",
    "Interval",
    "LogFormat",
    "Observation",
    "StepTiming",
    "detect_format",
    "observe_log",
    "steady_state",
]


def detect_format(lines: list[str]) -> LogFormat:
    """Which framework wrote the log, from the start-up lines only it prints."""
    if any(line.strip() == CONFIG_START for line in lines):
        return LogFormat.NEMO
    if any(ARGS_START.match(line) for line in lines):
        return LogFormat.MEGATRON
    if any(MESH.search(line) for line in lines):
        return LogFormat.TORCHTITAN
    return refuse(
        "not a Megatron-LM, Megatron-Bridge or TorchTitan training log: none of their start-up lines (argument dump,"
        " task configuration, device mesh) is in it; name the format with --framework"
    )


def _check_legal(observation: Observation) -> None:
    """Refuse a run whose recovered shape or layout breaks the planner's rules for its framework."""
    request = observation.request
    try:
        model = ModelSpec.model_validate(request["model"])
        training = TrainingSpec.model_validate(request["training"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise InvalidSpecError("log", f"recovered {where}: {validator_message(first['msg'])}") from None
    fields = dict(request["layout"])
    stages = fields.pop("layers_per_stage", None)
    layout = Layout(
        **fields | {"recompute": Recompute(fields["recompute"])},
        layers_per_stage=tuple(stages) if stages is not None else None,
    )
    rules = rule_set(request["framework"], request.get("framework_version"))
    violations = layout_violations(layout, model, training, request["cluster"]["num_gpus"], rules)
    if violations:
        refuse("the recovered layout breaks " + "; ".join(f"{v.rule}: {v.message}" for v in violations))


def observe_log(
    text: str,
    *,
    profile: str,
    num_gpus: int | None = None,
    log_format: LogFormat | None = None,
    skip: int | None = None,
    file: str = "",
    config_text: str | None = None,
) -> Observation:
    """The run a training log records, for hardware profile `profile`.

    `log_format` None: detected. `skip`: the last warm-up iteration (default: max(10% of the logged iterations,
    the first interval)). `config_text`: Megatron-Bridge's saved config YAML or TorchTitan's job TOML.
    Raises InvalidSpecError (field "log") naming what is missing or wrong.
    """
    if re.fullmatch(PROFILE_ID_PATTERN, profile) is None:
        raise InvalidSpecError("profile", f"{profile!r} does not match {PROFILE_ID_PATTERN}")
    lines = log_lines(text)
    kind = log_format or detect_format(lines)
    if kind is LogFormat.MEGATRON:
        observation = parse_megatron(lines, num_gpus=num_gpus, skip=skip, file=file)
    elif kind is LogFormat.NEMO:
        observation = parse_bridge(lines, num_gpus=num_gpus, skip=skip, file=file, config_text=config_text)
    else:
        observation = parse_torchtitan(lines, num_gpus=num_gpus, skip=skip, file=file, config_text=config_text)
    cluster = {"profile": profile, **observation.request["cluster"]}
    observation = dataclasses.replace(observation, request={**observation.request, "cluster": cluster})
    _check_legal(observation)
    return observation
