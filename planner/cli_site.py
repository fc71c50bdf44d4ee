"""`planner calibrate --profile ID --observations FILE --site NAME`: a site's observations in, a calibrated
profile out. A shell: it reads observation bodies the way `POST /v1/observations` reads them
(`api.observation_schemas.ObservationRequest`, `api.convert.observation_run`), calls
`planner.calibration.site.calibrate_site`, and prints. No math here. (Without --observations the command
calibrates on the database's stored observations: `api.calibrate`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from rich.table import Table

from api.convert import observation_run as convert_observation_run
from api.observation_schemas import ObservationRequest
from planner.calibration.published import PublishedRun
from planner.calibration.site import calibrate_site
from planner.calibration.site_report import SiteCalibration
from planner.cli_output import console
from planner.errors import InvalidSpecError
from planner.profiles import HardwareProfile, get_profile
from planner.rules import rule_set
from planner.validate import layout_violations

__all__ = ["observation_run", "print_site_calibration", "site_calibration"]

Schema = TypeVar("Schema", bound=BaseModel)


class Validator(Protocol):
    """Parses a body as the service does, naming the first bad field under `where` (`cli._validated`)."""

    def __call__(self, schema: type[Schema], body: Any, where: str = "") -> Schema: ...


def _root(profile_id: str) -> str:
    return profile_id.split("@")[0]


def observation_run(
    body: Any, i: int, base: HardwareProfile, profiles: Mapping[str, HardwareProfile], validated: Validator
) -> PublishedRun:
    """Observation `i` of a file (an observation body as `POST /v1/observations` takes it, optionally with an
    `id`) as a run to fit on.

    It must name `base` (or another site version of it) with no overrides, and its layout must use
    exactly the job's GPUs and break no rule of its framework (memory aside: it ran).
    """
    where = f"observations[{i}]"
    if not isinstance(body, dict):
        raise InvalidSpecError(where, "must be an object: an observation (estimate request fields plus measured)")
    fields = dict(body)
    run_id = fields.pop("id", None)
    if run_id is not None and not (isinstance(run_id, str) and 0 < len(run_id) <= 200):
        raise InvalidSpecError(f"{where}.id", "must be a string of 1 to 200 characters")
    request = validated(ObservationRequest, fields, where)
    if request.cluster.profile is None or _root(request.cluster.profile) != _root(base.id) or request.cluster.overrides:
        raise InvalidSpecError(
            f"{where}.cluster.profile", f"must name {base.id!r} (or a site version of it) without overrides"
        )
    run = convert_observation_run(request, profiles, run_id=run_id or f"observation-{i + 1}")
    layout = run.layout
    if layout.world_size != run.num_gpus:
        raise InvalidSpecError(
            f"{where}.layout",
            f"tp*pp*dp*cp = {layout.world_size} GPUs but cluster.num_gpus = {run.num_gpus}: an observed run"
            " uses every GPU of its job",
        )
    broken = layout_violations(
        layout, run.model, request.training, layout.world_size, rule_set(request.framework, request.framework_version)
    )
    if broken:
        raise InvalidSpecError(f"{where}.layout", "; ".join(v.message for v in broken))
    return run


def site_calibration(
    profile_id: str,
    bodies: Any,
    site: str,
    profiles: Mapping[str, HardwareProfile],
    validated: Validator,
    fitted_by: str,
) -> SiteCalibration:
    """Calibrate profile `profile_id` on a list of observation bodies (a file's contents) from `site`."""
    base = get_profile(profiles, profile_id)
    if not isinstance(bodies, list):
        raise InvalidSpecError("observations", "must be a JSON list of observation objects")
    runs = [observation_run(body, i, base, profiles, validated) for i, body in enumerate(bodies)]
    return calibrate_site(base, runs, site, fitted_by=fitted_by)


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def print_site_calibration(report: SiteCalibration) -> None:
    table = Table(title=f"{report.profile.id}: measured vs predicted step time (error = measured/predicted - 1)")
    for col in ("run", "layout", "net", "measured s", "before s", "after s", "LOO s", "before", "after", "LOO"):
        table.add_column(col, justify="left" if col in ("run", "layout", "net") else "right")
    for r in report.rows:
        table.add_row(
            r.id,
            r.layout,
            "yes" if r.crosses_network else "",
            f"{r.measured_step_s:.3f}",
            f"{r.predicted_before_s:.3f}",
            f"{r.predicted_after_s:.3f}",
            f"{r.predicted_loo_s:.3f}",
            _pct(r.error_before),
            _pct(r.error_after),
            _pct(r.error_loo),
        )
    console.print(table)
    for name, s in (("before", report.before), ("after", report.after), ("leave-one-out", report.loo)):
        console.print(f"{name}: mean |error| {s.mean_abs:.1%}, max {s.max_abs:.1%}")
    constants = Table(title="Constants")
    for col in ("constant", "unit", "before", "after", "bounds", "fitted", "sensitivity", "reason"):
        constants.add_column(col)
    for c in report.constants:
        constants.add_row(
            c.name,
            c.unit,
            f"{c.before:g}",
            f"{c.after:g}" + (f" (at {c.at_bound} bound)" if c.at_bound else ""),
            f"{c.lower:g}-{c.upper:g}",
            "yes" if c.fitted else "no",
            f"{c.sensitivity:.1%}",
            c.reason,
        )
    console.print(constants)
    console.print(f"unidentified: {', '.join(report.unidentified) or 'none'}")
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
