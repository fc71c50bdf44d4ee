"""Print how many distinct emitted commands the framework checks run through real framework code.

    PYTHONPATH=$PWD python3 -m tests.launch.count_checked

With the launch-check extra it counts test_framework_check.py's matrix (Megatron-Core, TorchTitan 0.2.2); in
the TorchTitan 0.3.0 venv (requirements/torchtitan03.lock) test_torchtitan03_check.py's. A check whose
framework is not installed is reported as skipped.
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

import pytest


def _module(name: str) -> ModuleType | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return importlib.import_module(f"tests.launch.{name}")
        except pytest.skip.Exception as skipped:
            print(f"{name}: skipped ({skipped.msg})")
            return None


def main() -> None:
    check = _module("test_framework_check")
    if check is not None:
        megatron = {p.launch.megatron.command for p in check._MEGATRON}
        torchtitan = {p.launch.torchtitan.command for p in check._TORCHTITAN}
        print(f"Megatron-LM {check.CHECKED_MEGATRON}: {len(megatron)} distinct commands from {len(check._MEGATRON)}")
        print(
            f"TorchTitan {check.CHECKED_TORCHTITAN}: {len(torchtitan)} distinct commands from {len(check._TORCHTITAN)}"
        )
    v03 = _module("test_torchtitan03_check")
    if v03 is not None:
        accepted = {p.launch.torchtitan.command for p in v03._PLANS}
        print(f"TorchTitan {v03.RELEASE}: {len(accepted)} distinct commands from {len(v03._PLANS)} plans;", end=" ")
        print(f"{len(v03._REFUSED)} hand-made cases refused by its rules: {', '.join(p.id for p in v03._REFUSED)}")


if __name__ == "__main__":
    main()
