"""Ready-to-run launch arguments of a plan for Megatron-LM, TorchTitan and NeMo 2.0.

Each framework's flags and keys are those of one targeted release (`FrameworkLaunch.framework_version`);
the tests check every emitted name against lists recorded from that version's source
(`tests/data/`). Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.launch.common import FrameworkLaunch, LaunchArgs, check_inputs, node_count
from planner.launch.inputs import LaunchInputs, TokenizerInputs
from planner.launch.megatron import megatron_launch
from planner.launch.nemo import nemo_launch
from planner.launch.torchtitan import torchtitan_launch
from planner.layout import Layout, training_for
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["FrameworkLaunch", "LaunchArgs", "LaunchInputs", "TokenizerInputs", "launch_args"]


def launch_args(
    model: ModelSpec,
    training: TrainingSpec,
    layout: Layout,
    num_gpus: int,
    gpus_per_node: int,
    inputs: LaunchInputs | None = None,
    versions: Mapping[str, str] | None = None,
) -> LaunchArgs:
    """The plan's launch for each framework. Raises InvalidSpecError for an illegal layout or node count.

    `inputs`: the request's data and tokenizer (mock data without them). `versions`: framework -> release id
    (`planner.rules.VERSIONS`) for the framework the plan is for; the others use their newest targeted release.
    """
    training = training_for(training, layout)
    check_inputs(model, training, layout, num_gpus, gpus_per_node)
    nodes = node_count(num_gpus, gpus_per_node)
    inputs, versions = inputs or LaunchInputs(), versions or {}
    return LaunchArgs(
        megatron=megatron_launch(model, training, layout, nodes, inputs, versions.get("megatron")),
        torchtitan=torchtitan_launch(model, training, layout, nodes, inputs, versions.get("torchtitan")),
        nemo=nemo_launch(model, training, layout, nodes, inputs, versions.get("nemo")),
    )
