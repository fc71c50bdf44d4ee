"""`planner` command line: validate the cost model, estimate a layout, list presets and profiles.

A thin shell: it parses arguments, calls `planner`, and prints. No math here.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from planner.calibration.report import VALIDATION_PROFILE, build_report, refit
from planner.calibration.write import gpu_kind, write_calibration
from planner.cli_output import layout_cell, print_estimate, print_plans, print_report
from planner.errors import PlannerError
from planner.estimate import estimate
from planner.layout import Layout
from planner.presets import get_preset, load_presets
from planner.profiles import ClusterSpec, get_profile, load_profiles
from planner.search.compare import heuristic_rows, published_rows
from planner.search.plan import plan
from planner.search.rank import Objective
from planner.specs import Precision, Recompute, TrainingSpec
from planner.timeline import schedule_svg

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Parallel-layout planner for transformer training.")


def _json(obj: Any) -> str:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    return json.dumps(obj, indent=2, default=str)


@app.command()
def validate(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Predicted vs published for every published run, per-table error, leave-one-out error, figure checks."""
    profile = load_profiles()[VALIDATION_PROFILE]
    report = build_report(profile)
    if as_json:
        typer.echo(_json(report))
        return
    print_report(report)


@app.command()
def calibrate(write: Annotated[bool, typer.Option(help="Store the fit in hardware_profiles/*.json.")] = False) -> None:
    """Fit the A100 constants on Narayanan 2021 Table 1 and print (or write) them."""
    profiles = dict(load_profiles())
    base = profiles[VALIDATION_PROFILE]
    fitted = refit(base)
    typer.echo(_json(fitted.model_dump()))
    if write:
        written = write_calibration(fitted, gpu_kind(base), profiles)
        typer.echo(f"wrote calibration to {', '.join(written)}")


@app.command(name="estimate")
def estimate_cmd(
    model: Annotated[str, typer.Option(help="Model preset id (see `planner presets`).")] = "gpt3-175b",
    profile: Annotated[str, typer.Option(help="Hardware profile id (see `planner profiles`).")] = "dgx-a100-80gb",
    gpus: Annotated[int, typer.Option(min=1, help="GPUs in the job.")] = 1024,
    batch: Annotated[int, typer.Option(min=1, help="Global batch size in sequences.")] = 1536,
    precision: Annotated[Precision, typer.Option(help="Number format.")] = Precision.BF16,
    tp: Annotated[int, typer.Option(min=1)] = 8,
    pp: Annotated[int, typer.Option(min=1)] = 8,
    dp: Annotated[int, typer.Option(min=1)] = 16,
    cp: Annotated[int, typer.Option(min=1)] = 1,
    ep: Annotated[int, typer.Option(min=1)] = 1,
    vp: Annotated[int, typer.Option(min=1)] = 1,
    micro_batch_size: Annotated[int, typer.Option(min=1)] = 1,
    recompute: Annotated[Recompute, typer.Option()] = Recompute.SELECTIVE,
    sequence_parallel: Annotated[bool, typer.Option()] = True,
    zero_stage: Annotated[int, typer.Option(min=0, max=3)] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Estimate step time, throughput and memory of one layout."""
    try:
        spec = get_preset(model).model
        cluster = ClusterSpec(profile=get_profile(load_profiles(), profile), num_gpus=gpus)
        layout = Layout(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            vp=vp,
            micro_batch_size=micro_batch_size,
            recompute=recompute,
            sequence_parallel=sequence_parallel,
            zero_stage=zero_stage,
        )
        result = estimate(spec, cluster, TrainingSpec(global_batch_size=batch, precision=precision), layout)
    except PlannerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(_json(result))
        return
    print_estimate(result)


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
def plan_cmd(
    model: Annotated[str, typer.Option(help="Model preset id (see `planner presets`).")] = "gpt3-175b",
    profile: Annotated[str, typer.Option(help="Hardware profile id (see `planner profiles`).")] = "dgx-a100-80gb",
    gpus: Annotated[int, typer.Option(min=1, help="GPUs available.")] = 1024,
    batch: Annotated[int, typer.Option(min=1, help="Global batch size in sequences.")] = 1536,
    seq_length: Annotated[int | None, typer.Option(min=1, help="Override the preset's sequence length.")] = None,
    precision: Annotated[Precision, typer.Option(help="Number format.")] = Precision.BF16,
    top_k: Annotated[int, typer.Option(min=1, max=100, help="Plans to return.")] = 10,
    objective: Annotated[Objective, typer.Option(help="step_time or gpu_efficiency.")] = Objective.STEP_TIME,
    constraint: Annotated[
        list[str] | None, typer.Option("--constraint", "-c", help="KEY=VALUE[,VALUE...], e.g. tp=8 or recompute=full")
    ] = None,
    train_tokens: Annotated[float | None, typer.Option(help="Tokens to train on: adds days and GPU-hours.")] = None,
    server: Annotated[str | None, typer.Option(help="Ask a running service (URL) instead of planning here.")] = None,
    svg: Annotated[Path | None, typer.Option(help="Write the best plan's pipeline schedule to this SVG file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Search every legal layout and print the best, with the heuristic baseline."""
    if server is not None:
        _plan_remote(
            server, model, profile, gpus, batch, seq_length, precision, top_k, objective, constraint, train_tokens
        )
        return
    try:
        spec = get_preset(model).model
        if seq_length is not None:
            spec = spec.model_copy(update={"seq_length": seq_length})
        cluster = ClusterSpec(profile=get_profile(load_profiles(), profile), num_gpus=gpus)
        training = TrainingSpec(global_batch_size=batch, precision=precision, train_tokens=train_tokens)
        result = plan(spec, cluster, training, _parse_constraints(constraint or []), top_k=top_k, objective=objective)
    except PlannerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if svg is not None and result.plans:
        best = result.plans[0]
        x, e = best.layout, best.estimate
        svg.write_text(
            schedule_svg(x.pp, x.vp, e.num_microbatches, e.microbatch_forward_s or 1.0, e.microbatch_backward_s or 2.0)
        )
    if as_json:
        typer.echo(_json(result))
        return
    print_plans(result)


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
    print("| case | baseline (tp = GPUs per server) | step s | best plan | step s | speedup |")
    print("|---|---|---|---|---|---|")
    for row in heuristic_rows(profiles):
        base = layout_cell(row.baseline) if row.baseline else "nothing fits"
        base_s = f"{row.baseline_step_s:.2f}" if row.baseline_step_s is not None else "-"
        speed = f"{row.speedup:.2f}x" if row.speedup is not None else "-"
        print(f"| {row.case} | {base} | {base_s} | {layout_cell(row.best)} | {row.best_step_s:.2f} | {speed} |")
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


def _plan_remote(
    server: str,
    model: str,
    profile: str,
    gpus: int,
    batch: int,
    seq_length: int | None,
    precision: Precision,
    top_k: int,
    objective: Objective,
    constraint: list[str] | None,
    train_tokens: float | None,
) -> None:
    from planner.client import PlannerClient, PlannerServiceError

    request: dict[str, Any] = {
        "model": {"preset": model, **({"seq_length": seq_length} if seq_length else {})},
        "cluster": {"profile": profile, "num_gpus": gpus},
        "training": {
            "global_batch_size": batch,
            "precision": precision.value,
            **({"train_tokens": train_tokens} if train_tokens else {}),
        },
        "constraints": _parse_constraints(constraint or []) or None,
        "top_k": top_k,
        "objective": objective.value,
    }
    try:
        with PlannerClient(server) as client:
            response = client.plan(request)
    except PlannerServiceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(response.model_dump_json(indent=2))


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker processes.")] = 1,
) -> None:
    """Run the HTTP service (uvicorn)."""
    import uvicorn

    uvicorn.run(
        "api.main:create_app", factory=True, host=host, port=port, workers=workers, timeout_graceful_shutdown=10
    )
