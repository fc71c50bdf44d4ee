"""`planner` command line: validate the cost model, plan, estimate a layout, list presets and profiles.

A thin shell: it parses arguments, calls `planner`, and prints. No math here. `plan` and `estimate` build
the API's request body, answer it with the API's own code (`api.convert`) or a service (`--server`), and print
the API's response model: `--json` is the service's response body.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import httpx
import typer
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from api.calibrate import calibrate_stored, calibration_out
from api.convert import answer_estimate, answer_plan
from api.schemas import EstimateRequest, HfConfigModel, PlanRequest, PresetModel
from planner.calibration import accuracy
from planner.calibration.fit import FIT_SETS
from planner.calibration.report import VALIDATION_PROFILE, VALIDATION_PROFILES, build_report, refit
from planner.calibration.write import write_calibration
from planner.cli_output import layout_cell, print_estimate, print_observation, print_plans, print_report
from planner.cli_site import print_site_calibration, site_calibration
from planner.client import PlannerClient, PlannerServiceError
from planner.errors import InfeasibleError, InvalidSpecError, PlannerError, validator_message
from planner.observe import LogFormat, observe_log
from planner.presets import load_presets
from planner.profiles import DEFAULT_MEMORY_HEADROOM, load_profiles
from planner.rules import Framework
from planner.search.compare import heuristic_rows, published_rows
from planner.search.rank import Objective
from planner.specs import AdamMoments, Fp8Recipe, ModelSpec, Precision, Recompute, RuntimeFeatures
from planner.store import LiveProfiles, Store, open_store
from planner.timeline import schedule_svg

# rich_markup_mode=None: click's plain help wraps text but never cuts an option's name (rich's does at 80 columns).
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Parallel-layout planner for transformer training.",
)

EXIT_DOES_NOT_FIT = 1
"""plan: nothing fits; estimate: the layout does not fit or breaks a rule."""
EXIT_INVALID_INPUT = 2
"""A bad file, option or field (typer uses 2 for usage errors too)."""
WORKER_HEALTHCHECK_S = 60
"""Seconds uvicorn's supervisor waits for a worker to answer its ping before killing it (uvicorn's default: 5).

On a loaded 2-core machine a worker busy with searches answered late, and was killed and restarted with
its requests, cache and metrics (bench/bench_soak.py counted 3 restarts in 30 s at 16 clients)."""
EXIT_SERVICE = 3
"""The service given with --server could not be reached, or failed (5xx)."""
DEFAULT_PRESET = "gpt3-175b"
CLI_OWNER = "cli"
"""The owner of what the command line stores directly in the database (a calibrated profile version)."""

ServerOpt = Annotated[str | None, typer.Option(help="Ask a running service (URL) instead of answering here.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="The API's response body instead of a table.")]
Request = TypeVar("Request", bound=BaseModel)
Response = TypeVar("Response", bound=BaseModel)


def _json(obj: Any) -> str:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    return json.dumps(obj, indent=2, default=str)


@contextmanager
def _exit_on_error() -> Iterator[None]:
    """One line on stderr and the documented exit status for every error a user can cause; never a traceback."""
    try:
        yield
    except InfeasibleError as exc:
        _fail(EXIT_DOES_NOT_FIT, " ".join([str(exc), *exc.reasons]))
    except PlannerError as exc:
        _fail(EXIT_INVALID_INPUT, str(exc))
    except PlannerServiceError as exc:
        _fail(EXIT_INVALID_INPUT if exc.status < 500 else EXIT_SERVICE, f"the service answered {exc}")
    except httpx.HTTPError as exc:
        _fail(EXIT_SERVICE, f"cannot reach the service: {exc}")


def _fail(code: int, message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _validated(schema: type[Request], body: Any, where: str = "") -> Request:
    """`body` parsed as the service parses a request (from JSON, strict); a failure names the first bad field."""
    try:
        return schema.model_validate_json(json.dumps(body))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in (where, *first["loc"]) if p != "")
        raise InvalidSpecError(loc or schema.__name__, validator_message(first["msg"])) from None


def _read_json(path: Path, option: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidSpecError(f"{option} {path}", f"not a readable JSON file ({exc})") from None


def _model_body(
    preset: str | None, hf_config: Path | None, model_file: Path | None, seq_length: int | None
) -> dict[str, Any]:
    """The request's `model` object: a preset, a Hugging Face config or an explicit shape, checked as the API does."""
    forms = {"--model": preset, "--hf-config": hf_config, "--model-file": model_file}
    given = [option for option, value in forms.items() if value is not None]
    if len(given) > 1:
        raise InvalidSpecError(" and ".join(given), "give one of --model, --hf-config and --model-file")
    seq = {} if seq_length is None else {"seq_length": seq_length}
    if hf_config is not None:
        _validated(HfConfigModel, body := {"hf_config": _read_json(hf_config, "--hf-config"), **seq}, "model")
    elif model_file is not None:
        shape = _read_json(model_file, "--model-file")
        if not isinstance(shape, dict):
            raise InvalidSpecError(f"--model-file {model_file}", "must hold a JSON object (the model's shape)")
        _validated(ModelSpec, body := {**shape, **seq}, "model")
    else:
        _validated(PresetModel, body := {"preset": DEFAULT_PRESET if preset is None else preset, **seq}, "model")
    return body


def _job_body(
    model: Annotated[
        str | None, typer.Option(help=f"Model preset id (see `planner presets`); default {DEFAULT_PRESET}.")
    ] = None,
    hf_config: Annotated[
        Path | None, typer.Option(exists=True, dir_okay=False, help="A Hugging Face config.json instead of a preset.")
    ] = None,
    model_file: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="A JSON file with an explicit shape (the API's model object)."),
    ] = None,
    seq_length: Annotated[
        int | None, typer.Option(min=1, help="Training sequence length (overrides the model's).")
    ] = None,
    profile: Annotated[str, typer.Option(help="Hardware profile id (see `planner profiles`).")] = "dgx-a100-80gb",
    gpus: Annotated[int, typer.Option(min=1, help="GPUs in the job (plan: an upper bound for gpu_efficiency).")] = 1024,
    batch: Annotated[int, typer.Option(min=1, help="Global batch size in sequences.")] = 1536,
    memory_headroom: Annotated[
        float, typer.Option(help="Fraction of each GPU's memory no plan may fill (0 to 0.5).")
    ] = DEFAULT_MEMORY_HEADROOM,
    precision: Annotated[Precision, typer.Option(help="Number format.")] = Precision.BF16,
    train_tokens: Annotated[float | None, typer.Option(help="Tokens to train on: adds days and GPU-hours.")] = None,
    activation_offload_layers: Annotated[
        int,
        typer.Option(
            min=0, help="Layers whose activations are offloaded to host memory (Megatron-Core CPU offloading); pp 1."
        ),
    ] = 0,
    recompute_num_layers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="With full recompute, recompute only the first N layers of each pipeline stage (Megatron-Core"
            " recompute_method block); default: every layer.",
        ),
    ] = None,
    adam_moments: Annotated[
        AdamMoments,
        typer.Option(help="Adam moments' storage: bf16 is Megatron-Core's precision-aware optimizer (zero >= 1)."),
    ] = AdamMoments.FP32,
    fp8_recipe: Annotated[
        Fp8Recipe | None,
        typer.Option(help="FP8 scaling recipe (precision fp8 only); default: the framework's own."),
    ] = None,
    grad_reduce_in_fp32: Annotated[
        bool | None,
        typer.Option(
            "--grad-reduce-in-fp32/--grad-reduce-in-16bit",
            help="Accumulate and reduce gradients in fp32, or in the 16-bit training dtype; default: the"
            " framework's (fp32 under bf16 and fp8).",
            show_default=False,
        ),
    ] = None,
    runtime: Annotated[
        list[str] | None,
        typer.Option(
            help="A training.runtime feature as KEY=VALUE, repeatable (true/false for switches), e.g."
            " moe_dispatcher=deepep or moe_a2a_overlap=true; the keys and defaults are the API's (docs/api.md)."
        ),
    ] = None,
    training_field: Annotated[
        list[str] | None,
        typer.Option(
            "--training",
            help="A training field that has no option of its own, as KEY=VALUE, repeatable (a JSON value or"
            " text), e.g. gradient_layout=pytorch_fsdp, fp8_param_gather=true or hidden_dropout=0.1; the keys and"
            " defaults are the API's (docs/api.md).",
        ),
    ] = None,
    framework: Annotated[
        Framework, typer.Option(help="The framework the layout is for; its rules apply (core: common rules only).")
    ] = Framework.MEGATRON,
    framework_version: Annotated[
        str | None,
        typer.Option(help="The framework release (e.g. core_v0.16.1 for megatron); default: the newest targeted."),
    ] = None,
) -> dict[str, Any]:
    """The `model`, `cluster`, `training` and `framework` fields that plan and estimate requests share."""
    training: dict[str, Any] = {"global_batch_size": batch, "precision": precision.value}
    if train_tokens is not None:
        training["train_tokens"] = train_tokens
    if activation_offload_layers:
        training["activation_offload_layers"] = activation_offload_layers
    if recompute_num_layers is not None:
        training["recompute_num_layers"] = recompute_num_layers
    if adam_moments is not AdamMoments.FP32:
        training["adam_moments"] = adam_moments.value
    if fp8_recipe is not None:
        training["fp8_recipe"] = fp8_recipe.value
    if grad_reduce_in_fp32 is not None:
        training["grad_reduce_in_fp32"] = grad_reduce_in_fp32
    if runtime:
        training["runtime"] = _runtime_body(runtime)
    training.update(_training_fields(training_field or []))
    return {
        "model": _model_body(model, hf_config, model_file, seq_length),
        "cluster": {"profile": profile, "num_gpus": gpus, "memory_headroom": memory_headroom},
        "training": training,
        "framework": framework.value,
        "framework_version": framework_version,
    }


TRAINING_OPTIONS: dict[str, str] = {
    "global_batch_size": "--batch",
    "precision": "--precision",
    "runtime": "--runtime",
    "grad_reduce_in_fp32": "--grad-reduce-in-fp32 / --grad-reduce-in-16bit",
    "fp8_recipe": "--fp8-recipe",
    "adam_moments": "--adam-moments",
    "activation_offload_layers": "--activation-offload-layers",
    "recompute_num_layers": "--recompute-num-layers",
    "train_tokens": "--train-tokens",
}
"""Training fields with an option of their own, which `--training` does not set (the option names them)."""


def _key_value(item: str, option: str) -> tuple[str, str]:
    """One `KEY=VALUE` item of a repeatable option, stripped; a malformed one is refused naming the option."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise InvalidSpecError(option, f"expected KEY=VALUE, got {item!r}")
    return key.strip(), value.strip()


def _training_fields(items: list[str]) -> dict[str, Any]:
    """`--training KEY=VALUE` options as fields of the API's `training` object: each value read as JSON (true,
    0.1, null) or else kept as text (pytorch_fsdp); the request's validation checks the keys and values, naming
    the field. A field with an option of its own (`TRAINING_OPTIONS`) is refused, naming that option."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = _key_value(item, "training")
        if key in TRAINING_OPTIONS:
            raise InvalidSpecError(f"training.{key}", f"set it with {TRAINING_OPTIONS[key]}, not --training")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _runtime_body(items: list[str]) -> dict[str, Any]:
    """`--runtime KEY=VALUE` options as the API's `training.runtime` object: true/false become switches, a list
    field's value (`recompute_modules=moe_act,layernorm`) its comma-separated items, other values stay text; the
    request's validation checks the keys and values, naming the field."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = _key_value(item, "runtime")
        if _is_list_field(key):
            out[key] = [part.strip() for part in value.split(",")]
            continue
        out[key] = {"true": True, "false": False}.get(value.lower(), value)
    return out


def _is_list_field(key: str) -> bool:
    """Whether `training.runtime.<key>` takes a list (its annotation holds a tuple), read off `RuntimeFeatures`."""
    field = RuntimeFeatures.model_fields.get(key)
    if field is None:
        return False
    kinds = typing.get_args(field.annotation) or (field.annotation,)
    return any(typing.get_origin(kind) is tuple for kind in kinds)


def _with_job_options(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with `_job_body`'s options (model, cluster, training) added; it receives their objects as `job`."""
    shared = inspect.signature(_job_body, eval_str=True).parameters
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "job"]

    @functools.wraps(command)
    def with_job(**options: Any) -> None:
        with _exit_on_error():
            job = _job_body(**{name: options.pop(name) for name in shared})
        command(job=job, **options)

    with_job.__signature__ = inspect.Signature([*shared.values(), *own])  # type: ignore[attr-defined]
    return with_job


def _int_list(text: str, option: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise InvalidSpecError(option, f"expected comma-separated integers, got {text!r}") from None


def _show(response: Response, as_json: bool, printer: Callable[[Response], None]) -> None:
    if as_json:
        typer.echo(response.model_dump_json(indent=2))
    else:
        printer(response)


@app.command()
def validate(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    write_bands: Annotated[
        bool,
        typer.Option(
            "--write-bands",
            help="Store the accuracy bands that estimates and plans quote (planner/data/accuracy_bands.json).",
        ),
    ] = False,
) -> None:
    """Predicted vs published for every published run, per-table error, leave-one-out error, figure checks, and the
    accuracy band per GPU kind and workload."""
    report = build_report(load_profiles())
    if write_bands:
        accuracy.write_bands(report.bands)
    if as_json:
        typer.echo(_json(report))
        return
    print_report(report)
    if write_bands:
        typer.echo(f"wrote {len(report.bands)} accuracy bands to {accuracy.BANDS_FILE}")


@app.command()
def calibrate(
    write: Annotated[bool, typer.Option(help="Store the built-in fit in hardware_profiles/*.json.")] = False,
    profile: Annotated[
        str | None,
        typer.Option(
            help="Calibrate this profile on a site's observations: the database's (PROFILE and PROFILE@SITE,"
            " stored as the next version of PROFILE@SITE), or --observations FILE's."
        ),
    ] = None,
    observations: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="JSON list of observations: estimate request fields plus measured.step_time_s (optional id).",
        ),
    ] = None,
    site: Annotated[
        str | None,
        typer.Option(help="Site name: the calibrated profile's id is PROFILE@SITE (implied by PROFILE@SITE)."),
    ] = None,
    out: Annotated[Path | None, typer.Option(dir_okay=False, help="Write the calibrated profile (JSON) here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Site calibration: the report as JSON.")] = False,
) -> None:
    """Fit each GPU kind's two constants on its fit set (A100: Narayanan 2021 Table 1; H100: Megatron-LM
    README and NeMo 24.07; GB200: Megatron-Bridge NeMo 26.04.01).

    With --profile: fit that profile's constants (and the network's efficiency where the runs identify it)
    on a site's observations, report the error before, after and leave-one-out, and store the calibrated
    profile PROFILE@SITE as its next version in the database (DATABASE_URL, else PLANNER_DB_PATH); with
    --observations FILE, fit that file's runs and store nothing (--out writes the profile). Exit status 2
    on invalid input.
    """
    if profile is not None or observations is not None or site is not None or out is not None:
        _calibrate_site(profile, observations, site, out, as_json, write)
        return
    profiles = dict(load_profiles())
    fits = {kind: refit(profiles[VALIDATION_PROFILES[kind]]) for kind in FIT_SETS}
    typer.echo(_json({kind: fit.model_dump() for kind, fit in fits.items()}))
    if write:
        written = write_calibration(fits, profiles)
        typer.echo(f"wrote calibration to {', '.join(written)}")


def _calibrate_site(
    profile: str | None, observations: Path | None, site: str | None, out: Path | None, as_json: bool, write: bool
) -> None:
    with _exit_on_error():
        if write:
            raise InvalidSpecError("--write", "stores the built-in fits; write a site calibration with --out")
        if profile is None:
            raise InvalidSpecError("--profile", "a site calibration needs --profile (and --site or PROFILE@SITE)")
        if observations is None:
            _calibrate_stored(profile, site, out, as_json)
            return
        if site is None:
            raise InvalidSpecError("--site", "a calibration from --observations needs --site")
        fitted_by = f"planner calibrate --profile {profile} --observations {observations.name} --site {site}"
        bodies = _read_json(observations, "--observations")
        report = site_calibration(profile, bodies, site, load_profiles(), _validated, fitted_by)
    if out is not None:
        out.write_text(json.dumps(report.profile.model_dump(mode="json"), indent=2) + "\n")
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        print_site_calibration(report)


def _open_store() -> Store:
    """The database DATABASE_URL or PLANNER_DB_PATH names, migrated; exit 2 with one line when unusable."""
    try:
        return open_store()
    except SQLAlchemyError as exc:
        reason = exc.orig if isinstance(exc, DBAPIError) else exc  # the driver's words, never the URL
        _fail(EXIT_INVALID_INPUT, f"cannot open the database: {str(reason).splitlines()[0]}")
    except OSError as exc:  # the SQLite file's folder cannot be made (a read-only filesystem)
        _fail(EXIT_INVALID_INPUT, f"cannot open the database file: {exc} (set PLANNER_DB_PATH or DATABASE_URL)")


def _calibrate_stored(profile: str, site: str | None, out: Path | None, as_json: bool) -> None:
    """The service's calibration (`api.calibrate.calibrate_stored`) on the database DATABASE_URL or
    PLANNER_DB_PATH names: its observations of PROFILE (and PROFILE@SITE) in, the next stored version out."""
    store = _open_store()
    try:
        registry = LiveProfiles(load_profiles(), store).current()
        fitted_by = f"planner calibrate --profile {profile}" + (f" --site {site}" if site else "")
        version = calibrate_stored(store, registry, profile, site, owner=CLI_OWNER, fitted_by=fitted_by)
    finally:
        store.close()
    answer = calibration_out(version)
    if out is not None:
        out.write_text(json.dumps(answer.report.profile.model_dump(mode="json"), indent=2) + "\n")
    if as_json:
        typer.echo(answer.model_dump_json(indent=2))
        return
    print_site_calibration(answer.report)
    typer.echo(f"stored {answer.profile_id} version {answer.version}")
    for skipped in answer.skipped:
        typer.echo(f"skipped observation {skipped.id}: {skipped.reason}")


@app.command(name="estimate")
@_with_job_options
def estimate_cmd(
    job: dict[str, Any],
    tp: Annotated[int, typer.Option(min=1, help="Tensor-parallel size.")] = 8,
    pp: Annotated[int, typer.Option(min=1, help="Pipeline-parallel size.")] = 8,
    dp: Annotated[int, typer.Option(min=1, help="Data-parallel size.")] = 16,
    cp: Annotated[int, typer.Option(min=1, help="Context-parallel size.")] = 1,
    ep: Annotated[int, typer.Option(min=1, help="Expert-parallel size.")] = 1,
    etp: Annotated[
        int | None, typer.Option(min=1, help="Expert tensor-parallel size (routed experts); default: the same as --tp.")
    ] = None,
    vp: Annotated[int, typer.Option(min=1, help="Model chunks per pipeline rank.")] = 1,
    micro_batch_size: Annotated[int, typer.Option(min=1, help="Sequences per micro-batch.")] = 1,
    num_microbatches: Annotated[
        int | None, typer.Option(min=1, help="Optional; must equal batch / (micro-batch size x dp).")
    ] = None,
    layers_per_stage: Annotated[
        str | None, typer.Option(help="Layers per pipeline stage, comma-separated (default: even split).")
    ] = None,
    recompute: Annotated[Recompute, typer.Option(help="Activation recomputation.")] = Recompute.SELECTIVE,
    sequence_parallel: Annotated[
        bool | None,
        typer.Option("--sequence-parallel/--no-sequence-parallel", help="Default: on when --tp > 1, else off."),
    ] = None,
    zero_stage: Annotated[int, typer.Option(min=0, max=3, help="0 none, 1 optimizer, 2 + grads, 3 + weights.")] = 1,
    server: ServerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Estimate step time, throughput and memory of one layout, and check it against every rule.

    Exit status: 0 the layout fits and breaks no rule; 1 it does not fit in memory or breaks a rule (the
    violations are printed, and are in the JSON); 2 invalid input (a bad file, an unknown preset or profile,
    a value out of range); 3 the service given with --server could not be reached or failed.
    """
    with _exit_on_error():
        layout: dict[str, Any] = {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "ep": ep,
            "vp": vp,
            "micro_batch_size": micro_batch_size,
            "recompute": recompute.value,
            "sequence_parallel": tp > 1 if sequence_parallel is None else sequence_parallel,
            "zero_stage": zero_stage,
        }
        if etp is not None:
            layout["etp"] = etp
        if num_microbatches is not None:
            layout["num_microbatches"] = num_microbatches
        if layers_per_stage is not None:
            layout["layers_per_stage"] = _int_list(layers_per_stage, "--layers-per-stage")
        body = {**job, "layout": layout}
        if server is not None:
            with PlannerClient(server) as client:
                response = client.estimate(body)
        else:
            response = answer_estimate(_validated(EstimateRequest, body), load_profiles())
    _show(response, as_json, print_estimate)
    if not response.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


@app.command()
def presets() -> None:
    """List the built-in model presets."""
    for key, preset in load_presets().items():
        m = preset.model
        typer.echo(
            f"{key:18s} layers={m.num_layers:<4d} hidden={m.hidden_size:<6d} heads={m.num_attention_heads:<4d}"
            f" moe={'yes' if m.moe else 'no'}"
        )


@app.command()
def profiles() -> None:
    """List the built-in hardware profiles."""
    for key, p in load_profiles().items():
        typer.echo(
            f"{key:14s} {p.gpu.name:22s} {p.gpu.memory_gib:>6.0f} GiB  nvlink domain {p.node.nvlink_domain_gpus}"
        )


@app.command(name="plan")
@_with_job_options
def plan_cmd(
    job: dict[str, Any],
    top_k: Annotated[int, typer.Option(min=1, max=100, help="Plans to return.")] = 10,
    objective: Annotated[Objective, typer.Option(help="step_time or gpu_efficiency.")] = Objective.STEP_TIME,
    max_step_time: Annotated[
        float | None, typer.Option(help="Drop plans whose step takes longer (seconds); bounds gpu_efficiency.")
    ] = None,
    constraint: Annotated[
        list[str] | None, typer.Option("--constraint", "-c", help="KEY=VALUE[,VALUE...], e.g. tp=8 or recompute=full")
    ] = None,
    data_path: Annotated[
        str | None, typer.Option(help="Training data for the launches (Megatron-LM --data-path prefix).")
    ] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="Tokenizer for the launches: a Hugging Face name or a local path.")
    ] = None,
    tokenizer_type: Annotated[
        str | None, typer.Option(help="Megatron-LM --tokenizer-type (default HuggingFaceTokenizer).")
    ] = None,
    server: ServerOpt = None,
    svg: Annotated[Path | None, typer.Option(help="Write the best plan's pipeline schedule to this SVG file.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Search every legal layout and print the best, with the heuristic baseline.

    Exit status: 0 at least one layout fits; 1 nothing fits (the diagnosis is printed, and is in the JSON);
    2 invalid input (a bad file, an unknown preset or profile, a value out of range, an unknown constraint);
    3 the service given with --server could not be reached or failed.
    """
    with _exit_on_error():
        body = {
            **job,
            "constraints": _parse_constraints(constraint or []) or None,
            "top_k": top_k,
            "objective": objective.value,
            "max_step_time_s": max_step_time,
            "launch": _launch_body(data_path, tokenizer, tokenizer_type),
        }
        if server is not None:
            with PlannerClient(server) as client:
                response = client.plan(body)
        else:
            response = answer_plan(_validated(PlanRequest, body), load_profiles())
    if svg is not None and response.plans:
        x, e = response.plans[0].layout, response.plans[0].estimate
        svg.write_text(
            schedule_svg(x.pp, x.vp, x.num_microbatches, e.microbatch_forward_s or 1.0, e.microbatch_backward_s or 2.0)
        )
    _show(response, as_json, print_plans)
    if not response.plans:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _launch_body(data_path: str | None, tokenizer: str | None, tokenizer_type: str | None) -> dict[str, Any] | None:
    """The request's `launch` object from the options given (None when none is)."""
    tok = {k: v for k, v in (("type", tokenizer_type), ("model", tokenizer)) if v is not None}
    body = {k: v for k, v in (("data_path", data_path), ("tokenizer", tok or None)) if v is not None}
    return body or None


def _parse_constraints(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, _, raw = item.partition("=")
        values: list[Any] = [_scalar(v) for v in raw.split(",") if v]
        out[key.strip()] = values
    return out


def _scalar(text: str) -> Any:
    text = text.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return int(text) if text.lstrip("-").isdigit() else text


@app.command()
def compare(
    table1: Annotated[bool, typer.Option(help="Also compare Narayanan 2021 Table 1's published layouts.")] = True,
) -> None:
    """Where the rule of thumb (tp = GPUs per server) loses, and what the planner would run instead."""
    profiles = dict(load_profiles())
    print(
        "| case | best plan | step s | rule of thumb, today's runtime | step s | speedup |"
        " paper's 2021 recipe | step s | speedup |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in heuristic_rows(profiles):
        cells = [row.case, layout_cell(row.best), f"{row.best_step_s:.2f}"]
        for layout, step_s, speedup in (
            (row.modern, row.modern_step_s, row.modern_speedup),
            (row.baseline, row.baseline_step_s, row.speedup),
        ):
            cells.append(layout_cell(layout) if layout else "nothing fits")
            cells.append(f"{step_s:.2f}" if step_s is not None else "-")
            cells.append(f"{speedup:.2f}x" if speedup is not None else "-")
        print(f"| {' | '.join(cells)} |")
    if not table1:
        return
    print()
    print("| Table 1 run | published layout | step s | paper-space best | step s | full-space best | step s |")
    print("|---|---|---|---|---|---|---|")
    for p in published_rows(profiles[VALIDATION_PROFILE]):
        print(
            f"| {p.run_id} | {layout_cell(p.published)}{'' if p.in_space and p.fits else ' (!)'} |"
            f" {p.published_step_s:.2f} | {layout_cell(p.paper_space_best)} | {p.paper_space_step_s:.2f}"
            f" ({p.published_step_s / p.paper_space_step_s:.2f}x) | {layout_cell(p.modern_best)} |"
            f" {p.modern_step_s:.2f} ({p.published_step_s / p.modern_step_s:.2f}x) |"
        )


class LogFormatChoice(StrEnum):
    AUTO = "auto"
    MEGATRON = "megatron"
    NEMO = "nemo"
    TORCHTITAN = "torchtitan"


def _read_text(path: Path, option: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InvalidSpecError(f"{option} {path}", f"not readable ({exc})") from None


@app.command()
def observe(
    logfile: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The training log (stdout of rank 0).")],
    profile: Annotated[str, typer.Option(help="Hardware profile id the run ran on (built-in or base@site).")],
    num_gpus: Annotated[
        int | None, typer.Option(min=1, help="GPUs in the run; needed where the log does not say (Megatron-Bridge).")
    ] = None,
    framework: Annotated[LogFormatChoice, typer.Option(help="The log's format; auto: detected.")] = (
        LogFormatChoice.AUTO
    ),
    skip: Annotated[
        int | None,
        typer.Option(
            min=0, help="Last warm-up iteration (default: max(10% of the logged iterations, first interval))."
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="Megatron-Bridge's saved config YAML, TorchTitan 0.2.2's job TOML, or TorchTitan 0.3.0's saved"
            " config JSON (debug.save_config_file).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The observation bodies (a JSON list) only.")] = False,
    post: Annotated[str | None, typer.Option(help="Send each observation to this service (URL).")] = None,
    token: Annotated[
        str | None, typer.Option(envvar="PLANNER_TOKEN", help="Bearer token for --post (or $PLANNER_TOKEN).")
    ] = None,
) -> None:
    """Read a training log (Megatron-LM, NeMo 2 / Megatron-Bridge, TorchTitan 0.2.2 or 0.3.0) and observe it.

    The step time is the median over the logged intervals after warm-up. A log whose layout cannot be
    recovered, that holds fewer than 3 intervals after warm-up, or that holds more than one run is refused.
    Exit status: 0 done; 2 the log is refused or an option is invalid; 3 the service given with --post could
    not be reached or failed.
    """
    with _exit_on_error():
        if post is not None and token is None:
            raise InvalidSpecError("--token", "--post needs a bearer token (--token or $PLANNER_TOKEN)")
        observation = observe_log(
            _read_text(logfile, "LOGFILE"),
            profile=profile,
            num_gpus=num_gpus,
            log_format=None if framework is LogFormatChoice.AUTO else LogFormat(framework.value),
            skip=skip,
            file=logfile.name,
            config_text=None if config is None else _read_text(config, "--config"),
        )
        bodies = [observation.body()]
        if post is not None and token is not None:
            with PlannerClient(post) as client:
                created = [client.create_observation(body, token) for body in bodies]
    if as_json:
        typer.echo(json.dumps(bodies, indent=2))
    else:
        print_observation(observation)
        typer.echo(json.dumps(bodies, indent=2))
    if post is not None:
        for stored in created:
            typer.echo(f"created observation {stored.get('id', stored)}")


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker processes.")] = 1,
    log_level: Annotated[LogLevel, typer.Option(help="Log threshold.")] = LogLevel.INFO,
    read_timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            max=3600,
            help="Seconds a client has to send a whole request (from its first byte, or from connecting);"
            " a stalled one gets 408 and is closed.",
        ),
    ] = 20.0,
) -> None:
    """Run the HTTP service (uvicorn), logging one JSON line per request (with its X-Request-ID) to stderr.

    /metrics sums every worker's counts (prometheus-client multiprocess mode, in a temporary directory
    made for this start and removed on exit).

    The database (DATABASE_URL, else the SQLite file PLANNER_DB_PATH, default
    ~/.local/share/layout-planner/planner.db) is migrated before the workers start; writes need a token
    from PLANNER_WRITE_TOKENS (`owner:token,...`). Exit status 2 when either is unusable.
    """
    import os

    import uvicorn

    from api.auth import WriteTokens
    from api.logs import log_config
    from api.metrics_dir import multiprocess_dir
    from api.protocol import PROTOCOL, READ_TIMEOUT_ENV

    os.environ[READ_TIMEOUT_ENV] = repr(read_timeout)
    with _exit_on_error():
        WriteTokens.from_env()
        _open_store().close()
    with multiprocess_dir():
        uvicorn.run(
            "api.main:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            http=PROTOCOL,
            timeout_graceful_shutdown=10,
            timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
            log_config=log_config(log_level.value),
            log_level=log_level.value,
        )


if __name__ == "__main__":
    app()
