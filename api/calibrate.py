"""A site calibration from stored observations: read them, fit (`planner.calibration.site.calibrate_site`),
store the calibrated profile as the next version of `base@site`. One path for
`POST /v1/hardware-profiles/{id}/calibrate` and `planner calibrate --profile ID` without `--observations`.
No math here: the fit is the calibration package's; the conversion is `api.convert`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from api.calibration_schemas import CalibrationOut, SkippedOut
from api.convert import observation_request, observation_run
from planner.calibration.published import PublishedRun
from planner.calibration.site import SITE_PATTERN, calibrate_site
from planner.calibration.site_report import SiteCalibration
from planner.errors import InvalidSpecError, PlannerError
from planner.profiles import HardwareProfile, get_profile
from planner.store import Observation, ProfileVersion, Store, list_observations, save_profile_version

__all__ = ["MAX_CALIBRATION_RUNS", "SkippedObservation", "calibrate_stored", "calibration_out", "split_profile_id"]

MAX_CALIBRATION_RUNS = 24
"""At most this many observations (the newest) enter one calibration. The fit runs one grid search per run
left out (leave-one-out), each over every run, so its time grows with about the square of the runs:
`python bench/bench_calibrate.py --runs 8,24,32` measured 1.2 s, 10.5 s and 17.8 s for three identified
constants on this project's 2-core machine. 24 keeps a calibration request near 10 s of one worker's time;
24 runs of one cluster pin three constants well. The report's notes say when older ones were left out."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedObservation:
    id: str
    reason: str


def split_profile_id(profile_id: str, site: str | None) -> tuple[str, str]:
    """(base id, site) for calibrating `profile_id` (`base` or `base@site`) at `site` (implied by `base@site`)."""
    base, at, named = profile_id.partition("@")
    if at and site is not None and site != named:
        raise InvalidSpecError("site", f"{site!r} differs from the site {named!r} the profile id names")
    chosen = named if at else site
    if chosen is None:
        raise InvalidSpecError("site", f"calibrating {base!r} needs a site name (or the id {base}@SITE)")
    if re.fullmatch(SITE_PATTERN, chosen) is None:
        raise InvalidSpecError("site", f"{chosen!r} must match {SITE_PATTERN} (lower-case letters, digits, '.', '-')")
    return base, chosen


def _newest(store: Store, profile_id: str) -> tuple[int, list[Observation]]:
    """(how many observations name `profile_id`, the newest `MAX_CALIBRATION_RUNS` of them): reads no more."""
    total = list_observations(store, profile=profile_id, limit=0).total
    offset = max(0, total - MAX_CALIBRATION_RUNS)
    return total, list_observations(store, profile=profile_id, limit=MAX_CALIBRATION_RUNS, offset=offset).items


def _runs(
    observations: list[Observation], profiles: Mapping[str, HardwareProfile]
) -> tuple[list[PublishedRun], list[str], list[SkippedObservation]]:
    runs, ids, skipped = [], [], []
    for o in observations:
        try:
            body = observation_request(o)
        except ValidationError as exc:  # stored by an older planner whose request schema was looser
            skipped.append(
                SkippedObservation(id=o.id, reason=f"its request no longer validates: {exc.errors()[0]['msg']}")
            )
            continue
        if body.cluster.overrides:
            skipped.append(
                SkippedObservation(id=o.id, reason="its cluster has overrides: the fit varies the named profile only")
            )
            continue
        if body.cluster.profile not in profiles:
            skipped.append(SkippedObservation(id=o.id, reason=f"profile {body.cluster.profile!r} is not served here"))
            continue
        try:
            runs.append(observation_run(body, profiles, run_id=o.id))
        except PlannerError as exc:  # e.g. a preset this planner no longer has
            skipped.append(SkippedObservation(id=o.id, reason=f"it no longer resolves: {exc}"))
            continue
        ids.append(o.id)
    return runs, ids, skipped


def calibrate_stored(
    store: Store,
    profiles: Mapping[str, HardwareProfile],
    profile_id: str,
    site: str | None,
    *,
    owner: str,
    fitted_by: str,
) -> ProfileVersion:
    """Fit built-in profile `base` on the stored observations that name `base` or `base@site`, and store the
    result (the report with the observation ids fitted on and those skipped) as the next version of
    `base@site`. The fit starts from the built-in constants every time (a new
    version does not compound the previous one's fit). Raises `InvalidSpecError` naming the field."""
    base_id, chosen = split_profile_id(profile_id, site)
    base = get_profile(profiles, base_id)
    (base_total, of_base), (site_total, of_site) = _newest(store, base_id), _newest(store, f"{base_id}@{chosen}")
    newest = sorted(of_base + of_site, key=lambda o: (o.created_at, o.id))[-MAX_CALIBRATION_RUNS:]
    older = base_total + site_total - len(newest)
    runs, ids, skipped = _runs(newest, profiles)
    if len(runs) < 2:
        raise InvalidSpecError(
            "observations",
            f"{len(runs)} usable stored observation(s) name {base_id!r} or {base_id}@{chosen}"
            f" ({len(skipped)} skipped); a calibration needs at least 2 (POST /v1/observations adds them)",
        )
    report = calibrate_site(base, runs, chosen, fitted_by=fitted_by)
    body = report.to_json()
    if older:
        body["notes"].append(
            f"{older} older observation(s) left out: a calibration fits the newest {MAX_CALIBRATION_RUNS}"
        )
    body["observation_ids"] = ids
    body["skipped"] = [{"id": s.id, "reason": s.reason} for s in skipped]
    return save_profile_version(store, report.profile, owner=owner, report=body)


def calibration_out(version: ProfileVersion) -> CalibrationOut:
    """A stored calibration as the API (and `planner calibrate --json`) answers it; the version must hold a
    report (`calibrate_stored` saves one; a version saved otherwise may not)."""
    body = version.report
    if body is None:
        raise ValueError(f"{version.id} version {version.version} was stored without a calibration report")
    return CalibrationOut(
        profile_id=version.id,
        version=version.version,
        owner=version.owner,
        created_at=version.created_at,
        observations=body.get("observation_ids"),
        skipped=[SkippedOut(**s) for s in body.get("skipped", [])],
        report=SiteCalibration.from_json(body),
    )
