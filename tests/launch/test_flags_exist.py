"""Every flag and key the launch builders emit exists in the pinned framework version.

The lists in tests/data were extracted from each framework's source at the commit named on their
first lines (tests/data/extract_launch_lists.py regenerates them).
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from planner.launch import FrameworkLaunch, launch_args
from planner.launch.megatron import MEGATRON_VERSIONS
from planner.launch.nemo import NEMO_VERSIONS
from planner.launch.torchtitan import TORCHTITAN_VERSIONS
from planner.launch.torchtitan_v03 import flag
from tests.launch.shell import torchrun_argv

DATA = Path(__file__).resolve().parents[1] / "data"
TORCHTITAN_FILE, NEMO_FILE = ("torchtitan_config_keys.txt", "nemo_strategy_params.txt")
TORCHTITAN03_FILE = "torchtitan_flags.v0.3.0.txt"
NEMO_FILES = {"2.7.3": "nemo_strategy_params.v2.7.3.txt", "2.5.0rc0+8cfedd7": NEMO_FILE}
MEGATRON_FILES = {release: f"megatron_lm_flags.{release}.txt" for release in MEGATRON_VERSIONS}


@cache
def _lines(name: str) -> tuple[list[str], frozenset[str]]:
    lines = (DATA / name).read_text().splitlines()
    return [x for x in lines if x.startswith("#")], frozenset(x for x in lines if x and not x.startswith("#"))


def _names(name: str) -> frozenset[str]:
    return _lines(name)[1]


def _flags(tokens: list[str]) -> list[str]:
    return [t.split("=", 1)[0] for t in tokens if t.startswith("--")]


def _after(command: str, marker: str) -> list[str]:
    tokens = shlex.split(command)
    return tokens[tokens.index(marker) + 1 :]


def _dotted(config: dict[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in config.items():
        keys += _dotted(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return keys


@pytest.mark.parametrize(
    ("name", "version"),
    [
        (MEGATRON_FILES["core_v0.15.0"], MEGATRON_VERSIONS["core_v0.15.0"]),
        (MEGATRON_FILES["core_v0.16.1"], MEGATRON_VERSIONS["core_v0.16.1"]),
        (TORCHTITAN_FILE, TORCHTITAN_VERSIONS["0.2.2"]),
        (NEMO_FILE, NEMO_VERSIONS["2.5.0rc0+8cfedd7"]),
    ],
)
def test_list_names_its_source_and_matches_the_version_stamp(name: str, version: str) -> None:
    headers, names = _lines(name)
    first = headers[0]
    assert re.search(r"\S+/\S+ [0-9a-f]{40} .*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* \S+", first), first
    commit = re.search(r"[0-9a-f]{40}", first)
    assert commit is not None and commit[0][:12] in version
    assert len(names) > 100


@pytest.mark.parametrize(
    ("name", "pattern", "version"),
    [
        (
            MEGATRON_FILES["core_v0.19.2"],
            r"# Megatron-LM core_v0\.19\.2: megatron_core-0\.19\.2-\S+\.whl sha256 [0-9a-f]{64} ",
            MEGATRON_VERSIONS["core_v0.19.2"],
        ),
        (
            TORCHTITAN03_FILE,
            r"# TorchTitan v0\.3\.0: torchtitan-0\.3\.0-py3-none-any\.whl sha256 [0-9a-f]{64} ",
            TORCHTITAN_VERSIONS["0.3.0"],
        ),
        (
            NEMO_FILES["2.7.3"],
            r"# nemo_toolkit-2\.7\.3-py3-none-any\.whl sha256 [0-9a-f]{64} ",
            NEMO_VERSIONS["2.7.3"],
        ),
    ],
)
def test_wheel_list_names_its_wheel(name: str, pattern: str, version: str) -> None:
    """Lists read from a registry wheel (Megatron-LM core_v0.19.2: Python >= 3.12, not installable here;
    TorchTitan v0.3.0: its tyro parser; NeMo 2.7.3: no git tag here) name the wheel with its hash, which the version
    stamp repeats."""
    headers, names = _lines(name)
    first = headers[0]
    assert re.match(pattern, first), first
    digest = re.search(r"sha256 ([0-9a-f]{64})", first)
    assert digest is not None and f"sha256 {digest[1][:12]}" in version
    assert len(names) > 100


@pytest.mark.parametrize("release", list(MEGATRON_FILES))
def test_recorded_megatron_list_has_no_virtual_pipeline_size_flag(release: str) -> None:
    names = _names(MEGATRON_FILES[release])
    assert "--virtual-pipeline-model-parallel-size" not in names
    assert {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"} <= names


@pytest.mark.parametrize("release", list(MEGATRON_FILES))
def test_megatron_flags_exist(case: Any, release: str) -> None:
    versions = {"megatron": release}
    args = launch_args(case.model, case.training, case.layout, case.num_gpus, case.gpus_per_node, None, versions)
    launch: FrameworkLaunch = args.megatron
    known = _names(MEGATRON_FILES[release])
    assert launch.script is not None
    script = torchrun_argv(launch.script, 0)
    script_flags = script[script.index("pretrain_gpt.py") + 1 :]
    for flags in (_flags(launch.args), _flags(_after(launch.command, "pretrain_gpt.py")), _flags(script_flags)):
        assert flags
        assert [f for f in flags if f not in known] == []
    assert set(launch.config) <= known
    assert launch.framework_version == MEGATRON_VERSIONS[release]


def test_torchtitan_keys_exist(case: Any) -> None:
    versions = {"torchtitan": "0.2.2"}
    args = launch_args(case.model, case.training, case.layout, case.num_gpus, case.gpus_per_node, None, versions)
    launch: FrameworkLaunch = args.torchtitan
    assert launch.framework_version == TORCHTITAN_VERSIONS["0.2.2"]
    known = _names(TORCHTITAN_FILE)
    from_args = [f.removeprefix("--") for f in _flags(launch.args)]
    from_command = [f.removeprefix("--") for f in _flags(_after(launch.command, "torchtitan.train"))]
    # A shipped flavor is named on the CLI; the TOML is read for other shapes and for splits the CLI cannot spell.
    toml_only = "module_fqns_per_model_part" in launch.config["parallelism"]  # type: ignore[operator]
    assert ("job.config_file" in from_command) == ("model.flavor" not in from_command or toml_only)
    for keys in (from_args, from_command, _dotted(launch.config)):
        assert keys
        assert [k for k in keys if k not in known] == []


@pytest.mark.parametrize("release", list(NEMO_FILES))
def test_nemo_keys_exist(case: Any, release: str) -> None:
    versions = {"nemo": release}
    args = launch_args(case.model, case.training, case.layout, case.num_gpus, case.gpus_per_node, None, versions)
    launch: FrameworkLaunch = args.nemo
    assert launch.framework_version == NEMO_VERSIONS[release]
    known = _names(NEMO_FILES[release])
    from_args = [a.split("=", 1)[0] for a in launch.args]
    from_command = [a.split("=", 1)[0] for a in _after(launch.command, "--yes")]
    for keys in (from_args, from_command, list(launch.config)):
        assert keys
        assert [k for k in keys if k not in known] == []


def test_nemo_273_recipe_exists(case: Any) -> None:
    """2.7.3's list also records the recipes `--factory` can name (nemo/collections/llm/recipes/__init__.py)."""
    launch: FrameworkLaunch = case.launch().nemo
    assert launch.framework_version == NEMO_VERSIONS["2.7.3"]
    assert f"factory.{_after(launch.command, '--factory')[0]}" in _names(NEMO_FILES["2.7.3"])


def test_nemo_273_list_only_adds_keys() -> None:
    """Every key of the 2.5.0rc0 commit's list is in 2.7.3's (megatron-core 0.16.1 and MegatronStrategy add some),
    but MLATransformerConfig's max_position_embeddings, which megatron-core 0.16.1 removed (its
    original_max_position_embeddings stays)."""
    old, new = _names(NEMO_FILES["2.5.0rc0+8cfedd7"]), _names(NEMO_FILES["2.7.3"])
    assert old - new == {"model.config.max_position_embeddings"}
    assert len(new - old) > 0
    assert {"trainer.strategy.ckpt_optim_fully_reshardable", "model.config.cuda_graph_impl"} <= new - old


def _v03_flags(config: dict[str, Any]) -> list[str]:
    """The flag each `config` entry sets: `--section.key` (False as `--section.no-key`), the subcommand."""
    flags: list[str] = []
    for key, value in config.items():
        if key == "activation_checkpoint":
            flags.append(f"activation-checkpoint:{value}")
        elif isinstance(value, dict):
            flags += [flag(f"{key}.{k}" if v is not False else f"{key}.no_{k}") for k, v in value.items()]
        else:
            flags.append(flag(key))
    return flags


def _v03_names(tokens: list[str]) -> list[str]:
    return [t for t in tokens if t.startswith(("--", "activation-checkpoint:"))]


def test_torchtitan03_flags_exist(case: Any) -> None:
    """Every flag, subcommand and `config` entry of the v0.3.0 launch is in its tyro parser's recorded list."""
    launch: FrameworkLaunch = case.launch().torchtitan
    assert launch.framework_version == TORCHTITAN_VERSIONS["0.3.0"]
    known = _names(TORCHTITAN03_FILE)
    program = _after(launch.command, "torchtitan.train")
    for names in (_v03_names(program), _v03_names(launch.args), _v03_flags(launch.config)):
        assert names
        assert [n for n in names if n not in known] == []
    assert program[-1].startswith("activation-checkpoint:")  # tyro reads what follows a subcommand as its options
    assert program[:4] == ["--module", launch.config["module"], "--config", launch.config["config"]]
