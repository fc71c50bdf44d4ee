"""Ready-to-run launch arguments of a plan for Megatron-LM, TorchTitan and NeMo 2.0.

Each framework's flags and keys are those of one pinned version (`FrameworkLaunch.framework_version`);
the tests check every emitted name against lists recorded from that version's source
(`tests/data/`). Pure functions: no I/O.
"""

from __future__ import annotations

from planner.launch.common import FrameworkLaunch, LaunchArgs, check_inputs, node_count
from planner.launch.megatron import megatron_launch
from planner.launch.nemo import nemo_launch
from planner.launch.torchtitan import torchtitan_launch
from planner.layout import Layout
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["FrameworkLaunch", "LaunchArgs", "launch_args"]


def launch_args(
    model: ModelSpec, training: TrainingSpec, layout: Layout, num_gpus: int, gpus_per_node: int
) -> LaunchArgs:
    """The plan's launch for each framework. Raises InvalidSpecError for an illegal layout or node count."""
    check_inputs(model, training, layout, num_gpus, gpus_per_node)
    nodes = node_count(num_gpus, gpus_per_node)
    return LaunchArgs(
        megatron=megatron_launch(model, training, layout, nodes),
        torchtitan=torchtitan_launch(model, training, layout, nodes),
        nemo=nemo_launch(model, training, layout, nodes),
    )
