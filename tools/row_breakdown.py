"""Print, for every published run, its predicted step split by kind and one layer's forward parts.

Usage: `PYTHONPATH=$PWD python3 tools/row_breakdown.py [SUBSTRING ...]` (only runs whose id contains one of the
substrings). Constants are the profiles' stored calibration (`planner calibrate --write`), as `planner validate`
uses for fit rows. Reads `planner.calibration.breakdown`; prints milliseconds for the layer parts.
"""

from __future__ import annotations

import sys

from planner.calibration.breakdown import row_breakdown
from planner.calibration.published import published_runs
from planner.calibration.report import validation_profile_id
from planner.profiles import load_profiles


def main(filters: list[str]) -> None:
    profiles = load_profiles()
    for run in published_runs():
        if filters and not any(f in run.id for f in filters):
            continue
        b = row_breakdown(run, profiles, validation_profile_id(run))
        parts = " ".join(f"{k}={v:.3f}" for k, v in b.step_parts_s.items() if v > 5e-4)
        print(
            f"{b.id:42s} published {b.published_step_s:8.3f} s  predicted {b.predicted_step_s:8.3f} s"
            f"  error {b.error:+6.1%}  m={b.num_microbatches}\n    step s: {parts}"
        )
        x = b.layer
        print(
            f"    layer fwd ms: gemms {1e3 * x.gemms_s:.3f} core {1e3 * x.attention_core_s:.3f}"
            f" (bwd {1e3 * x.attention_core_backward_s:.3f}) elementwise {1e3 * x.elementwise_s:.3f}"
            f" casts {1e3 * x.quantize_s:.3f} host floor {1e3 * x.host_floor_s:.3f};"
            f" logits fwd+bwd {1e3 * x.logits_s:.2f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
