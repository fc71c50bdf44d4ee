"""Print how many distinct emitted commands the framework check runs through real framework code.

    PYTHONPATH=$PWD python3 -m tests.launch.count_checked

Needs the launch-check extra (it builds the same matrix as test_framework_check.py).
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from tests.launch import test_framework_check as check


def main() -> None:
    megatron = {p.launch.megatron.command for p in check._MEGATRON}
    torchtitan = {p.launch.torchtitan.command for p in check._TORCHTITAN}
    print(f"Megatron-LM {check.CHECKED_MEGATRON}: {len(megatron)} distinct commands from {len(check._MEGATRON)} plans")
    titan = f"TorchTitan {check.CHECKED_TORCHTITAN}"
    print(f"{titan}: {len(torchtitan)} distinct commands from {len(check._TORCHTITAN)} plans")


if __name__ == "__main__":
    main()
