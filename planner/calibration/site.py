"""Per-site calibration: fit a profile's constants on runs measured on one cluster (issue 13, part 3).

The constants are the two the built-in calibration fits per GPU kind (GEMM peak
efficiency eta, per-GEMM fixed time t0; `fit.BOUNDS`) plus, when the runs cross
the network enough to tell, the network's efficiency (`efficiency.network`: NCCL
bus bandwidth over the NICs / line rate). The fit is `fit.fit_values`: the
built-in grid search, bounded, over the identified constants only.

Identifiability. For each run and constant, the range effect is the change of
log predicted step time when the constant moves from its lower to its upper
bound, the others at the base profile's values (a secant over the whole range,
not a local slope: an overlapped collective can be hidden at the base value and
exposed lower in the range). Constants are taken in the order eta, t0, network;
each one's sensitivity is the RMS over the runs of its range-effect column after
regressing out the columns already taken (least squares): what moving it across
its range changes that the constants fitted before it cannot absorb. This is the
Gauss-Newton curvature of the mean squared log error along the constant, profiled
over the others. Below `IDENTIFIED_SENSITIVITY` the valley is flat and the
constant keeps the base value. A constant is also kept when the runs are too few
(leave-one-out must still have as many rows as constants: at most n - 1 constants
for n runs) and the network when no run's prediction depends on it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean

import numpy as np

from planner.calibration.fit import (
    BOUNDS,
    GEMM_OVERHEAD_US,
    GEMM_PEAK_EFFICIENCY,
    NETWORK_EFFICIENCY,
    constants_of,
    fit_values,
    log_errors,
    measured_step_s,
    predict,
    with_constants,
)
from planner.calibration.published import PublishedRun, gpu_kind_of
from planner.calibration.report import layout_text
from planner.calibration.site_report import ConstantFit, ErrorSummary, SiteCalibration, SiteRow
from planner.errors import InvalidSpecError
from planner.profiles import Calibration, EfficiencySection, HardwareProfile

__all__ = ["IDENTIFIED_SENSITIVITY", "MIN_RUNS", "SITE_PATTERN", "Grid", "calibrate_site", "grid", "identify"]

MIN_RUNS = 2
"""Fewer runs cannot be fitted and checked: leave-one-out needs one run to fit on and one to predict."""

IDENTIFIED_SENSITIVITY = 0.02
"""A constant is identified when moving it across its whole range changes the runs' predicted step times
by at least 2% RMS beyond what the constants fitted before it absorb. A stated assumption: repeated
measurements of one training job spread by about 1-2% (step-time noise, stragglers), so a constant
whose whole range moves the predictions less than that is set by noise, not by the cluster."""

SITE_PATTERN = r"[a-z0-9][a-z0-9.-]{0,63}"
"""A site name: the part after `@` of `profiles.PROFILE_ID_PATTERN`."""

ORDER = (GEMM_PEAK_EFFICIENCY, GEMM_OVERHEAD_US, NETWORK_EFFICIENCY)
"""The order constants are identified in: the one that moves every prediction first."""


_NO_EFFECT = 1e-9
"""A range effect below this (log step time) is rounding: the run's prediction does not depend on the constant."""


@dataclass(frozen=True, slots=True)
class Grid:
    """`fit.grid_search`'s settings for a number of free constants."""

    points: int
    rounds: int
    zoom: float

    def final_step(self, name: str) -> float:
        """The last round's grid step for constant `name`, at most (`fit.grid_search`)."""
        bound = BOUNDS[name]
        return float((bound.upper - bound.lower) / (self.points - 1) / self.zoom ** (self.rounds - 1))


def grid(free: int) -> Grid:
    """The grid for `free` constants. Up to two: the built-in fit's (21 points, 5 rounds of 4x zoom).
    Three: 13 points (13^3 = 2,197 per run and round) and 11 rounds of 2x zoom (final step 1/12/1024 of
    each range, finer than the constants' rounding): with 4x zoom the window after the coarse round
    spans only +-1.5 steps, too little to follow the eta-t0 valley (runs generated at t0 = 8 us gave
    7.07 us), and 9 rounds still stopped 0.02 us off."""
    return Grid(21, 5, 4) if free <= 2 else Grid(13, 11, 2)


def _check(base: HardwareProfile, runs: Sequence[PublishedRun], site: str) -> None:
    if re.fullmatch(SITE_PATTERN, site) is None:
        raise InvalidSpecError("site", f"{site!r} must match {SITE_PATTERN} (lower-case letters, digits, '.', '-')")
    if len(runs) < MIN_RUNS:
        raise InvalidSpecError(
            "observations",
            f"{len(runs)} run(s) given; a calibration needs at least {MIN_RUNS} (fit on one, check on one)",
        )
    kind = gpu_kind_of(base.gpu.name)
    for i, run in enumerate(runs):
        if run.gpu_kind != kind:
            raise InvalidSpecError(
                f"observations[{i}]",
                f"run {run.id!r} is on {run.gpu_kind} GPUs but profile {base.id!r} is {kind}: a calibration fits one"
                " GPU kind",
            )
        if run.step_time_s is not None and not (math.isfinite(run.step_time_s) and run.step_time_s > 0):
            raise InvalidSpecError(f"observations[{i}].measured.step_time_s", "must be a positive, finite time")


def _range_effects(runs: Sequence[PublishedRun], base: HardwareProfile) -> np.ndarray:
    """runs x constants (`ORDER`): log predicted step time at the constant's upper bound minus at its lower
    bound, the other constants at the base profile's values."""
    at_base = constants_of(base)
    grid = {k: np.full(2 * len(ORDER), at_base[k]) for k in ORDER}
    for j, k in enumerate(ORDER):
        grid[k][2 * j : 2 * j + 2] = BOUNDS[k].lower, BOUNDS[k].upper
    # log_errors = log(measured / predicted step): at lower minus at upper = log(step_hi) - log(step_lo)
    errors = np.stack([log_errors(run, base, grid) for run in runs])
    return np.asarray(errors[:, 0::2] - errors[:, 1::2])


def identify(effects: np.ndarray, fit_network: bool | None) -> list[tuple[str, bool, float, str]]:
    """(constant, fitted, sensitivity, reason) for each constant of `ORDER`."""
    n = effects.shape[0]
    taken: list[np.ndarray] = []
    out = []
    for j, name in enumerate(ORDER):
        column = effects[:, j]
        if taken:
            basis = np.stack(taken, axis=1)
            column = column - basis @ np.linalg.lstsq(basis, column, rcond=None)[0]
        sensitivity = float(np.sqrt(np.mean(column**2)))
        fitted, reason = _decide(name, sensitivity, n, len(taken), effects[:, j], fit_network)
        if fitted:
            taken.append(effects[:, j])
        out.append((name, fitted, sensitivity, reason))
    return out


def _decide(
    name: str, sensitivity: float, n: int, taken: int, effect: np.ndarray, fit_network: bool | None
) -> tuple[bool, str]:
    """Whether to fit one constant, and the reason either way."""
    moved = f"moving it over {BOUNDS[name].lower:g}-{BOUNDS[name].upper:g} changes predictions by {sensitivity:.1%} RMS"
    if name == NETWORK_EFFICIENCY:
        crossing = int(np.sum(np.abs(effect) > _NO_EFFECT))
        if fit_network is False:
            return False, "not requested (fit_network=False)"
        if crossing == 0:
            if fit_network:
                raise InvalidSpecError("fit_network", "no run's prediction depends on the network: it cannot be fitted")
            return (
                False,
                "no run crosses the network (every group stays in one NVLink domain, or its traffic is hidden)",
            )
        moved = f"{crossing} of {n} runs cross the network; {moved}"
    if taken + 1 > n - 1:
        return False, f"{n} runs identify at most {n - 1} constant(s) (leave-one-out fits each on n - 1 runs)"
    if name == NETWORK_EFFICIENCY and fit_network:
        return True, f"requested (fit_network=True); {moved}"
    if sensitivity < IDENTIFIED_SENSITIVITY:
        return False, f"flat: {moved}, below {IDENTIFIED_SENSITIVITY:.0%}, beyond what the constants before it absorb"
    return True, f"identified: {moved} beyond what the constants before it absorb"


def _labels(runs: Sequence[PublishedRun]) -> list[str]:
    """Run ids, with the variant where an id names several runs (the two arms of a published comparison)."""
    ids = [r.id for r in runs]
    return [r.id if ids.count(r.id) == 1 else f"{r.id}/{r.variant}" for r in runs]


def _summary(errors: Sequence[float]) -> ErrorSummary:
    return ErrorSummary(mean_abs=mean(abs(e) for e in errors), max_abs=max(abs(e) for e in errors))


def _at_bound(name: str, value: float, free: int) -> str | None:
    bound, step = BOUNDS[name], grid(free).final_step(name)
    if value <= bound.lower + step:
        return "lower"
    if value >= bound.upper - step:
        return "upper"
    return None


def _profile(
    base: HardwareProfile, site: str, after: dict[str, float], labels: list[str], fitted_by: str
) -> HardwareProfile:
    """The calibrated profile `root@site` (root: the base id before any `@`), validated like a profile file."""
    raw = base.model_dump()
    raw["id"] = f"{base.id.split('@')[0]}@{site}"
    raw["name"] = f"{base.name or base.id} calibrated at {site}"[:200]
    raw["calibration"] = Calibration(
        gemm_peak_efficiency=after[GEMM_PEAK_EFFICIENCY],
        gemm_overhead_us=after[GEMM_OVERHEAD_US],
        fitted_on=labels,
        fitted_by=fitted_by,
    ).model_dump()
    raw["efficiency"] = EfficiencySection(**{**base.efficiency.model_dump(), "network": after[NETWORK_EFFICIENCY]})
    raw["efficiency"] = raw["efficiency"].model_dump()
    raw["sources"] = {
        **base.sources,
        "calibration": f"site calibration of {base.id} on {len(labels)} observations at site {site!r}"
        " (planner/calibration/site.py); the runs are listed in calibration.fitted_on",
    }
    return HardwareProfile.model_validate(raw)


def calibrate_site(
    base: HardwareProfile,
    runs: Sequence[PublishedRun],
    site: str,
    *,
    fit_network: bool | None = None,
    fitted_by: str | None = None,
) -> SiteCalibration:
    """Fit `base`'s constants on `runs` measured at `site`; the report holds the profile `base@site`.

    `fit_network`: None decides from the data (see the module docstring), True fits the network's efficiency
    whenever a run crosses the network, False never fits it. Raises `InvalidSpecError` for fewer than
    `MIN_RUNS` runs, a run of another GPU kind, a bad site name or a non-positive measured time.
    """
    _check(base, runs, site)
    effects = _range_effects(runs, base)
    decisions = identify(effects, fit_network)
    free = [name for name, fitted, _, _ in decisions if fitted]
    before = constants_of(base)
    after = before | _fit(runs, base, free)
    labels = _labels(runs)
    profile = _profile(base, site, after, labels, fitted_by or f"calibrate_site({base.id!r}, site={site!r})")
    held_out = [with_constants(base, before | _fit([r for r in runs if r is not run], base, free)) for run in runs]
    crossing = np.abs(effects[:, ORDER.index(NETWORK_EFFICIENCY)]) > _NO_EFFECT
    rows = tuple(
        _row(label, run, (base, profile, held), bool(crosses))
        for label, run, held, crosses in zip(labels, runs, held_out, crossing, strict=True)
    )
    constants = tuple(
        ConstantFit(
            name=name,
            unit=BOUNDS[name].unit,
            before=before[name],
            after=after[name],
            lower=BOUNDS[name].lower,
            upper=BOUNDS[name].upper,
            fitted=fitted,
            at_bound=_at_bound(name, after[name], len(free)) if fitted else None,
            sensitivity=sensitivity,
            reason=reason,
        )
        for name, fitted, sensitivity, reason in decisions
    )
    return SiteCalibration(
        base_id=base.id,
        site=site,
        profile=profile,
        constants=constants,
        unidentified=tuple(c.name for c in constants if not c.fitted),
        rows=rows,
        before=_summary([r.error_before for r in rows]),
        after=_summary([r.error_after for r in rows]),
        loo=_summary([r.error_loo for r in rows]),
        rms_log_error_before=_rms_log([r.measured_step_s / r.predicted_before_s for r in rows]),
        rms_log_error_after=_rms_log([r.measured_step_s / r.predicted_after_s for r in rows]),
        notes=_notes(constants, rows),
    )


def _fit(runs: Sequence[PublishedRun], base: HardwareProfile, free: Sequence[str]) -> dict[str, float]:
    """The `free` constants fitted on `runs` (none: nothing to fit)."""
    if not free:
        return {}
    g = grid(len(free))
    return fit_values(runs, base, free, g.rounds, g.points, g.zoom)[0]


def _rms_log(ratios: Sequence[float]) -> float:
    return math.sqrt(mean(math.log(x) ** 2 for x in ratios))


def _row(label: str, run: PublishedRun, profiles: tuple[HardwareProfile, ...], crosses: bool) -> SiteRow:
    """One run predicted on the base profile, the calibrated one and the one fitted without it."""
    measured = measured_step_s(run)
    steps = [predict(run, p)[1] for p in profiles]
    return SiteRow(
        id=label,
        layout=layout_text(run),
        crosses_network=crosses,
        measured_step_s=measured,
        predicted_before_s=steps[0],
        predicted_after_s=steps[1],
        predicted_loo_s=steps[2],
        error_before=measured / steps[0] - 1,
        error_after=measured / steps[1] - 1,
        error_loo=measured / steps[2] - 1,
    )


def _notes(constants: Sequence[ConstantFit], rows: Sequence[SiteRow]) -> tuple[str, ...]:
    notes = [
        f"{c.name} = {c.after:g} sits at its {c.at_bound} bound ({c.lower if c.at_bound == 'lower' else c.upper:g}):"
        " the runs push it past the plausible range; check them, and the profile's datasheet numbers"
        for c in constants
        if c.at_bound
    ]
    notes += [f"{c.name} kept at the base profile's {c.before:g}: {c.reason}" for c in constants if not c.fitted]
    loo, before = mean(abs(r.error_loo) for r in rows), mean(abs(r.error_before) for r in rows)
    if loo >= before:
        notes.append(
            f"leave-one-out mean error {loo:.1%} is not below the error before ({before:.1%}):"
            " the fit does not predict runs it has not seen better than the base profile"
        )
    return tuple(notes)
