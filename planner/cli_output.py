"""How the command line shows reports, estimates and plans (rich tables). Formatting only.

Plans and estimates are printed from the API's response models, so a local run and a `--server` run print the same.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table
from rich.text import Text

from api.schemas import AccuracyOut, EstimateResponse, LayoutOut, ModelOut, PlanResponse
from planner.calibration.report import Report
from planner.layout import Layout, recompute_text
from planner.observe import Observation

__all__ = ["console", "layout_cell", "print_estimate", "print_observation", "print_plans", "print_report"]

console = Console(width=200)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def print_report(report: Report) -> None:
    for kind in report.kinds:
        cal = kind.calibration
        fitted = f"fitted on {', '.join(kind.fit_sources)} ({len(cal.fitted_on)} rows)" if cal.fitted_on else ""
        console.print(
            f"{kind.gpu_kind} ({kind.profile_id}): gemm_peak_efficiency={cal.gemm_peak_efficiency},"
            f" gemm_overhead_us={cal.gemm_overhead_us} {fitted or f'transferred from {cal.transferred_from}'}"
        )
    table = Table(title="Predicted vs published (throughput error = predicted/published - 1)")
    columns = ("GPU", "run", "source", "variant", "layout", "TFLOP/s pub", "pred", "step s pub", "pred", "error")
    for col in (*columns, "LOO", "LOSO", "mem GiB"):
        table.add_column(col, justify="left" if col in ("GPU", "run", "source", "variant", "layout") else "right")
    for r in report.runs:
        table.add_row(
            r.gpu_kind,
            r.id + (" (fit)" if r.in_fit else ""),
            r.group,
            r.variant,
            Text(r.layout),  # not markup: selective[layernorm,moe_act] would read as a style tag
            f"{r.published_tflops:.1f}",
            f"{r.predicted_tflops:.1f}",
            f"{r.published_step_s:.2f}",
            f"{r.predicted_step_s:.2f}",
            f"{r.error:+.1%}",
            _pct(r.loo_error),
            _pct(r.loso_error),
            f"{r.peak_memory_gib:.1f}/{r.capacity_gib:.0f}",
        )
    console.print(table)
    summary = Table(title="Per source")
    for col in ("GPU", "source", "variant", "rows", "role", "mean |error|", "p90 |error|", "max |error|"):
        summary.add_column(col)
    for g in report.groups:
        role = "fit" if g.in_fit else "prediction"
        summary.add_row(
            g.gpu_kind,
            g.group,
            g.variant,
            str(g.rows),
            role,
            f"{g.mean_abs_error:.1%}",
            f"{g.p90_abs_error:.1%}",
            f"{g.max_abs_error:.1%}",
        )
    console.print(summary)
    held_out = Table(
        title="Held out: every row predicted by constants fitted on no row of its source"
        " (prediction rows as they are, fit rows leave-one-source-out)"
    )
    for col in ("GPU", "rows", "of them MoE", "mean |error|", "p90 |error|", "max |error|"):
        held_out.add_column(col)
    for accuracy in report.held_out:
        held_out.add_row(
            accuracy.gpu_kind,
            str(accuracy.rows),
            str(accuracy.moe_rows),
            f"{accuracy.mean_abs_error:.1%}",
            f"{accuracy.p90_abs_error:.1%}",
            f"{accuracy.max_abs_error:.1%}",
        )
    console.print(held_out)
    bands = Table(
        title="Accuracy bands: the held-out errors per GPU kind and workload that estimates and plans quote"
        " (error = measured step / predicted step - 1)"
    )
    for col in ("GPU", "workload", "rows", "mean error", "mean |error|", "p90 |error|", "lowest", "highest", "sources"):
        bands.add_column(col)
    for band in report.bands:
        bands.add_row(
            band.gpu_kind,
            band.workload.value,
            str(band.rows),
            f"{band.mean_error:+.1%}",
            f"{band.mean_abs_error:.1%}",
            f"{band.p90_abs_error:.1%}",
            f"{band.min_error:+.1%}",
            f"{band.max_error:+.1%}",
            ", ".join(band.sources),
        )
    console.print(bands)
    holdouts = Table(title="Leave one source out: each source predicted with constants fitted on the kind's others")
    for col in ("GPU", "held-out source", "rows", "eta", "t0 us", "mean |error|", "max |error|"):
        holdouts.add_column(col)
    for kind in report.kinds:
        if kind.loo_mean_abs_error is not None and kind.loo_max_abs_error is not None:
            console.print(
                f"{kind.gpu_kind} leave-one-out over the fit rows: mean |error| {kind.loo_mean_abs_error:.1%},"
                f" max {kind.loo_max_abs_error:.1%}"
            )
        for h in kind.holdouts:
            holdouts.add_row(
                h.gpu_kind,
                h.source,
                str(h.rows),
                f"{h.gemm_peak_efficiency:.3f}",
                f"{h.gemm_overhead_us:.1f}",
                f"{h.mean_abs_error:.1%}",
                f"{h.max_abs_error:.1%}",
            )
    console.print(holdouts)
    for gain in report.gains:
        console.print(
            f"Korthikanti 2022 {gain.id}: SP + selective over full recompute: published +{gain.published_pct:.1f}%,"
            f" predicted +{gain.predicted_pct:.1f}% ({gain.predicted_pct - gain.published_pct:+.1f} points)"
        )
    for fig in report.figures:
        console.print(f"{fig.figure} {'HOLDS' if fig.holds else 'FAILS'}: {fig.finding}\n    {fig.detail}")
    _print_bus_bandwidth(report)


def _print_bus_bandwidth(report: Report) -> None:
    title = "nccl-tests bus bandwidth, GB/s (error = predicted/published - 1; one NIC: rings without rails)"
    table = Table(title=title)
    for col in ("row", "profile", "collective", "ranks", "published", "predicted", "error", "one NIC"):
        table.add_column(col, justify="left" if col in ("row", "profile", "collective") else "right")
    for r in report.bus_bandwidth:
        table.add_row(
            r.id,
            r.profile,
            r.collective,
            f"{r.ranks} ({r.nodes} node{'s' if r.nodes > 1 else ''})",
            f"{r.published_gb_per_s:.0f}",
            f"{r.predicted_gb_per_s:.0f}",
            f"{r.error:+.1%}",
            f"{r.one_nic_gb_per_s:.0f}",
        )
    console.print(table)


def model_line(model: ModelOut) -> str:
    """One line naming the model the answer planned, and where its sequence length came from."""
    m = model.shape
    size = f"{model.total_params / 1e9:.1f}B params" + (
        f" ({model.active_params / 1e9:.1f}B active)" if model.active_params != model.total_params else ""
    )
    label = f"{m.name}: " if m.name else ""
    return (
        f"model {label}{m.num_layers} layers, hidden {m.hidden_size}, {m.num_attention_heads} heads"
        f" / {m.num_query_groups} groups"
        + (f", head dim {m.head_dim}" if m.attention_hidden_size != m.hidden_size else "")
        + f", {size}; seq {m.seq_length} from"
        f" {model.sources.get('seq_length', '?').split(' (')[0]} (--json has every field's source)"
    )


def print_estimate(response: EstimateResponse) -> None:
    e = response.estimate
    console.print(model_line(response.model), highlight=False)
    console.print(layout_cell(response.layout), markup=False)
    console.print(
        f"step {e.step_time_s:.3f} s | {e.tokens_per_s:,.0f} tokens/s | model {e.model_tflops_per_gpu:.1f} TFLOP/s/GPU"
        f" | MFU {e.mfu:.1%} | bubble {e.bubble_fraction:.1%} | m={response.layout.num_microbatches}"
    )
    console.print("time: " + ", ".join(f"{k} {v:.3f}s" for k, v in e.time_breakdown_s.items() if v > 0))
    mem = e.memory
    console.print(
        f"memory {mem.peak_gib:.1f} / {mem.usable_gib:.1f} GiB usable ({mem.capacity_gib:.0f} GiB less"
        f" {response.memory_headroom:.0%} headroom): " + ", ".join(f"{k} {v:.1f}" for k, v in mem.breakdown_gib.items())
    )
    n = e.network
    console.print(
        f"network: pp hops {n.pp_hops_over_network}/{n.pp_hops}, dp groups {n.dp_groups_over_network}/{n.dp_groups},"
        f" tp groups {n.tp_groups_over_network}"
    )
    _print_accuracy(response.accuracy)
    if response.fits:
        console.print("fits")
        return
    console.print("DOES NOT FIT or breaks a rule:")
    for v in response.violations:
        console.print(f"  [{v.rule}] {v.message}", markup=False)


def _print_accuracy(accuracy: AccuracyOut | None) -> None:
    """One line on how far the model was from published runs like this one (`planner validate`'s bands)."""
    if accuracy is None:
        console.print("checked against no published run of this GPU kind and workload (planner validate)")
    else:
        console.print(f"checked against published runs: {accuracy.text}", markup=False)


def seconds(x: float) -> str:
    """A time to 3 significant figures, as the table and the page show it (the JSON keeps every digit)."""
    if not math.isfinite(x) or x < 100:
        return f"{x:#.3g}".rstrip(".")
    return f"{round(x, 2 - math.floor(math.log10(x))):,.0f}"


def layout_cell(x: Layout | LayoutOut) -> str:
    extra = (f" ep{x.ep}" if x.ep > 1 else "") + (f" etp{x.etp}" if x.etp != x.tp else "")
    return (
        f"tp{x.tp} pp{x.pp} dp{x.dp} cp{x.cp}{extra} vp{x.vp} b{x.micro_batch_size}"
        f" {recompute_text(x.recompute, x.recompute_modules)}"
        f"{' sp' if x.sequence_parallel else ''} zero{x.zero_stage}"
    )


def print_plans(result: PlanResponse) -> None:
    table = Table(
        title=f"Ranked plans ({result.search.candidates:,} candidates, {result.search.feasible:,} fit,"
        f" {result.search.elapsed_ms:.0f} ms)"
    )
    for col in ("#", "GPUs", "layout", "stages", "step s", "tokens/s", "MFU", "mem/usable GiB"):
        table.add_column(col)
    rows = [(f"{p.rank}{' ≈' if p.equivalent else ''}", p) for p in result.plans]
    baselines = (("today", result.modern_baseline), ("2021", result.baseline))
    rows += [(f"base {when}", b.plan) for when, b in baselines if b.plan is not None]
    for label, p in rows:
        e = p.estimate
        stages = p.layout.layers_per_stage or []
        shown = ",".join(map(str, stages)) if len(stages) <= 8 else f"{stages[0]},{stages[1]}..{stages[-1]}"
        table.add_row(
            label,
            str(p.num_gpus),
            Text(layout_cell(p.layout)),  # not markup (its module list is in brackets)
            shown,
            seconds(e.step_time_s),
            f"{e.tokens_per_s:,.0f}",
            f"{e.mfu:.1%}",
            f"{e.memory.peak_gib:.1f}/{e.memory.usable_gib:.1f}",
        )
    console.print(model_line(result.model), highlight=False)
    console.print(f"for {result.search.framework} ({result.search.framework_version}): only layouts it accepts")
    console.print(table)
    named = (("baseline on today's runtime", result.modern_baseline), ("paper's 2021 baseline", result.baseline))
    for name, b in named:
        if b.speedup_of_best is not None:
            console.print(f"{name} ({b.rule}): best plan is {b.speedup_of_best:.2f}x faster", markup=False)
        elif b.plan is None:
            console.print(f"{name} ({b.rule}): nothing fits", markup=False)
    if any(p.equivalent for p in result.plans):
        console.print(
            f"≈: within {result.equivalent_within:.0%} of the fastest (the model's uncertainty), simplest first",
            markup=False,
        )
    _print_accuracy(result.accuracy)
    if result.idle_reason is not None:
        console.print(f"idle GPUs: {result.idle_gpus} ({result.idle_reason})", markup=False)
    if result.diagnosis is not None:
        console.print(result.diagnosis.message, markup=False)
    if result.plans and result.plans[0].estimate.days_to_train is not None:
        e = result.plans[0].estimate
        console.print(f"best plan: {e.days_to_train:.1f} days, {e.gpu_hours:,.0f} GPU-hours")


def print_observation(observation: Observation) -> None:
    """What a training log yielded: layout, model shape, step time with its spread, the intervals used."""
    request, t = observation.request, observation.timing
    model, layout, training = request["model"], request["layout"], request["training"]
    release = f" {request['framework_version']}" if "framework_version" in request else ""
    table = Table(title=f"Recovered from {observation.file or 'the log'} ({observation.log_format.value}{release})")
    table.add_column("item")
    table.add_column("value")
    shape = f"{model['num_layers']} layers, hidden {model['hidden_size']}, heads {model['num_attention_heads']}"
    shape += f"/{model.get('num_query_groups', model['num_attention_heads'])}, ffn {model.get('ffn_hidden_size', '-')}"
    shape += f", head dim {model['head_dim']}" if "head_dim" in model else ""
    shape += f", vocab {model['vocab_size']}, seq {model['seq_length']}" + (", MoE" if "moe" in model else "")
    axes = ("tp", "pp", "dp", "cp", "ep", "vp")
    parallel = " ".join(f"{axis}={layout[axis]}" for axis in axes)
    rows = [
        ("model", shape),
        ("cluster", f"{request['cluster']['profile']}, {request['cluster']['num_gpus']} GPUs"),
        (
            "layout",
            f"{parallel} mbs={layout['micro_batch_size']} recompute={layout['recompute']}"
            f" sp={layout['sequence_parallel']} zero={layout['zero_stage']}",
        ),
        ("training", f"global batch {training['global_batch_size']}, {training['precision']}"),
        ("step time", f"{t.step_time_s:.4g} s (IQR/median {t.spread:.1%})"),
        (
            "iterations used",
            f"{t.first_iteration}-{t.last_iteration}: {t.intervals_used} intervals"
            f" ({t.intervals_skipped} warm-up skipped)",
        ),
    ]
    if observation.peak_memory_gib is not None:
        rows.append(("peak memory", f"{observation.peak_memory_gib:.2f} GiB reserved"))
    rows += [("note", note) for note in observation.notes]
    for row in rows:
        table.add_row(*row)
    console.print(table)
