"""The schemathesis configuration both fuzz suites start from (tests/api/test_fuzz.py, test_observations_http.py):
a fixed seed, derandomized generation, no example database, and the known preset and profile ids as
dictionaries, so that many generated bodies name real ones rather than drawing 422s for an unknown id."""

from __future__ import annotations

import json

from planner.presets import load_presets
from planner.profiles import DEFAULT_PROFILES_DIR, load_profiles

PRESETS = sorted(load_presets())
PROFILES = sorted(load_profiles(DEFAULT_PROFILES_DIR))


def fuzz_config(seed: int, max_examples: int) -> str:
    """The shared head of a schemathesis TOML config; callers append `[parameters]` and their checks."""
    return f"""
seed = {seed}
request-timeout = 15
suppress-health-check = ["all"]

[generation]
mode = "all"
deterministic = true
database = "none"
max-examples = {max_examples}

[dictionaries.presets]
values = {json.dumps(PRESETS)}

[dictionaries.profiles]
values = {json.dumps(PROFILES)}
"""
