"""Published runs as a site's observations: the figures README's "Site calibration" paragraph quotes.

    PYTHONPATH=$PWD python3 tools/site_calibration_published.py

Case 1: Korthikanti 2022 and Narayanan 2021 Table 2 (20 A100 rows the built-in fit never saw) calibrating the
stock DGX A100 80 GB profile. Case 2: the 12 Megatron-era H100 rows (not the MosaicML FSDP rows,
`HOLDOUT_ONLY_SOURCES`) calibrating DGX H100 from a deliberately wrong prior (eta 0.9, t0 0 us). The same
cases are tests/calibration/test_site.py's acceptance tests.
"""

from __future__ import annotations

from planner.calibration.fit import GEMM_OVERHEAD_US, GEMM_PEAK_EFFICIENCY, with_constants
from planner.calibration.published import published_runs
from planner.calibration.report import HOLDOUT_ONLY_SOURCES
from planner.calibration.site import calibrate_site
from planner.cli_site import print_site_calibration
from planner.profiles import load_profiles


def main() -> None:
    profiles, runs = load_profiles(), published_runs()
    a100 = [r for r in runs if r.group in ("Korthikanti2022", "Narayanan2021_Table2")]
    h100 = [r for r in runs if r.gpu_kind == "H100" and r.group not in HOLDOUT_ONLY_SOURCES]
    wrong = with_constants(profiles["dgx-h100"], {GEMM_PEAK_EFFICIENCY: 0.9, GEMM_OVERHEAD_US: 0.0})
    for title, base, rows in (
        ("A100: Korthikanti 2022 + Narayanan 2021 Table 2 on the stock dgx-a100-80gb", profiles["dgx-a100-80gb"], a100),
        ("H100: every H100 row on dgx-h100 from a wrong prior (eta 0.9, t0 0 us)", wrong, h100),
    ):
        print(f"== {title}")
        print_site_calibration(calibrate_site(base, rows, "published"))


if __name__ == "__main__":
    main()
