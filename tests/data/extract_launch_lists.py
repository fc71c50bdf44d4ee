"""Regenerate the recorded flag/key lists in this folder from the frameworks' own source.

The lists are data for `tests/launch`: every flag or key that `planner.launch` emits must be in them.
Nothing here is imported by the planner. Run it with local git mirrors of the repositories:

    python tests/data/extract_launch_lists.py MEGATRON_GIT TORCHTITAN_GIT NEMO_GIT LIGHTNING_GIT

Each argument is a git directory (bare or not). The pinned refs are below; change them, rerun, and
update `planner.launch` (its version strings) in the same commit.

Megatron-LM flags, one list per release (`megatron_lm_flags.<release>.txt`), from any of a git ref, a wheel
or an unpacked source tree (a folder holding megatron/training/arguments.py):

    python tests/data/extract_launch_lists.py --megatron core_v0.16.1=MEGATRON_GIT@core_v0.16.1 \
        --megatron core_v0.19.2=/tmp/wheels/megatron_core-0.19.2-cp312-....whl

From core_v0.16 on most flags are generated from dataclasses (megatron/training/argument_utils.py
ArgumentGroupFactory), so the list is read by running that release's own `add_megatron_arguments` on an
empty argparse parser (with the installed torch and megatron-core) and listing its option strings, not by
reading add_argument calls. Python 3.11 runs core_v0.19.2's parser once `typing.override` (3.12) is taken
from typing_extensions; nothing else of that release is run.

TorchTitan v0.3.0 flags (`torchtitan_flags.v0.3.0.txt`), from its wheel, with an interpreter that can import it
(the tests/launch/test_torchtitan03_check.py venv: requirements/torchtitan03.lock):

    /work/venv-tt3/bin/python tests/data/extract_launch_lists.py --torchtitan03 torchtitan-0.3.0-py3-none-any.whl

v0.3.0 has no key file to read: ConfigManager hands `--section.key` overrides to tyro, which builds its parser
from the `Trainer.Config` a config_registry function returns. The list is that parser's option strings (tyro's
spelling, `--training.seq-len`), its activation-checkpoint subcommands and their options, for each config
function the launch names, plus ConfigManager's own `--module` and `--config`.

NeMo 2.7.3 keys (`nemo_strategy_params.v2.7.3.txt`), from the registry's wheels (see NEMO_WHEELS), each a .whl
or an unzipped folder; the same classes as the git list above:

    python tests/data/extract_launch_lists.py --nemo-wheels nemo_toolkit-2.7.3-py3-none-any.whl \
        megatron_core-0.16.1-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl \
        lightning-2.4.0-py3-none-any.whl
"""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent

MEGATRON_REF = "core_v0.15.0"  # last Megatron-Core release whose arguments.py spells out every flag
TORCHTITAN_REF = "v0.2.2"  # last TorchTitan release with the TOML JobConfig (job_config.py)
NEMO_REF = "8cfedd7203462cb251a914e700e5605444277561"  # NeMo main after v2.5.0rc0 (2025-09-20)
# NeMo's requirements/manifest.json pins Megatron-LM at this commit: its dataclasses are NeMo's model.config etc.
NEMO_MEGATRON_REF = "b615e731080e83703ff3e93b11d3a9bc5bb281c3"
LIGHTNING_REF = "2.4.0"  # NeMo's requirements_lightning.txt: lightning>2.2.1,<=2.4.0


def _git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True, text=True).stdout


def _source(gitdir: str, ref: str, path: str) -> ast.Module:
    return ast.parse(_git(gitdir, "show", f"{ref}:{path}"))


def _stamp(repo: str, gitdir: str, ref: str, path: str, what: str) -> str:
    commit, date = _git(gitdir, "log", "-1", "--format=%H %cI", ref).split()
    tag = f" ({ref})" if ref not in ("HEAD", commit) else ""
    return f"# {repo} {commit}{tag} {date} {path}: {what}"


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise KeyError(name)


def _fields(cls: ast.ClassDef) -> Iterator[tuple[str, ast.expr]]:
    """Annotated class-level names of a dataclass body (ClassVar excluded), with their annotation."""
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "ClassVar" not in ast.unparse(node.annotation):
                yield node.target.id, node.annotation


def _init_params(cls: ast.ClassDef) -> list[str]:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            args = node.args
            return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.arg != "self"]
    raise KeyError(f"{cls.name}.__init__")


def megatron_flags(gitdir: str) -> list[str]:
    path = "megatron/training/arguments.py"
    flags: set[str] = set()
    for node in ast.walk(_source(gitdir, MEGATRON_REF, path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for arg in node.args:
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    raise ValueError(f"non-literal flag name at line {node.lineno}")
                if arg.value.startswith("--"):
                    flags.add(arg.value)
    header = _stamp("NVIDIA/Megatron-LM", gitdir, MEGATRON_REF, path, "every --flag given to add_argument")
    return [header, *sorted(flags)]


def _dotted(tree: ast.Module, cls: ast.ClassDef, prefix: str) -> Iterator[str]:
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for name, annotation in _fields(cls):
        if isinstance(annotation, ast.Name) and annotation.id in classes:
            yield from _dotted(tree, _class(tree, annotation.id), f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def torchtitan_keys(gitdir: str) -> list[str]:
    path = "torchtitan/config/job_config.py"
    tree = _source(gitdir, TORCHTITAN_REF, path)
    keys = sorted(_dotted(tree, _class(tree, "JobConfig"), ""))
    header = _stamp("pytorch/torchtitan", gitdir, TORCHTITAN_REF, path, "every dotted key of JobConfig")
    return [header, *keys]


_MCORE = "megatron/core"
_NEMO_PARTS: tuple[tuple[str, str, str, str, str], ...] = (
    # (source, path, class, key prefix, what: __init__ parameters or dataclass fields), in the list's header order
    ("nemo", "nemo/lightning/pytorch/strategies/megatron_strategy.py", "MegatronStrategy", "trainer.strategy.", "init"),
    ("mcore", f"{_MCORE}/transformer/transformer_config.py", "TransformerConfig", "model.config.", "fields"),
    # MLATransformerConfig: the fields a DeepSeek config (NeMo's deepseek.py DeepSeekConfig) adds for MLA.
    ("mcore", f"{_MCORE}/transformer/transformer_config.py", "MLATransformerConfig", "model.config.", "fields"),
    ("mcore", f"{_MCORE}/model_parallel_config.py", "ModelParallelConfig", "model.config.", "fields"),
    (
        "mcore",
        f"{_MCORE}/distributed/distributed_data_parallel_config.py",
        "DistributedDataParallelConfig",
        "trainer.strategy.ddp.",
        "fields",
    ),
    ("mcore", f"{_MCORE}/optimizer/optimizer_config.py", "OptimizerConfig", "optim.config.", "fields"),
    ("nemo", "nemo/collections/llm/gpt/model/base.py", "GPTConfig", "model.config.", "fields"),
    # SSMConfig: the config class of NeMo's hybrid (Mamba) recipes, e.g. nemotronh_8b's NemotronHConfig8B.
    ("nemo", "nemo/collections/llm/gpt/model/ssm.py", "SSMConfig", "model.config.", "fields"),
    ("nemo", "nemo/collections/llm/gpt/data/mock.py", "MockDataModule", "data.", "init"),
    ("nemo", "nemo/lightning/pytorch/plugins/mixed_precision.py", "MegatronMixedPrecision", "trainer.plugins.", "init"),
    ("lightning", "lightning/pytorch/trainer/trainer.py", "Trainer", "trainer.", "init"),
)
"""Where NeMo's override keys come from: NeMo's own classes, the Megatron-Core dataclasses NeMo builds its
configs from, and Lightning's Trainer."""


_NEMO_RECIPES = "nemo/collections/llm/recipes/__init__.py"


def _dunder_all(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    raise KeyError("__all__")


def _nemo_list(
    read: Callable[[str, str], ast.Module], stamp: Callable[[str, str, str], str], *, recipes: bool = False
) -> list[str]:
    """NeMo's key list from `read(source, path)` (a module's AST) and `stamp(source, path, what)` (a header);
    with `recipes`, also `factory.NAME` for each recipe `nemo llm pretrain --factory` can name (the recipes
    package's __all__)."""
    headers: list[str] = []
    keys: set[str] = set()
    for source, path, name, prefix, what in _NEMO_PARTS:
        cls = _class(read(source, path), name)
        names = _init_params(cls) if what == "init" else [field for field, _ in _fields(cls)]
        headers.append(stamp(source, path, f"{prefix}*"))
        keys.update(prefix + n for n in names)
    if recipes:
        headers.append(stamp("nemo", _NEMO_RECIPES, "factory.* (__all__: the recipes --factory names)"))
        keys.update(f"factory.{n}" for n in _dunder_all(read("nemo", _NEMO_RECIPES)))
    return [*headers, *sorted(keys)]


def nemo_keys(megatron_git: str, nemo_git: str, lightning_git: str) -> list[str]:
    """The NeMo main-commit list (`nemo_strategy_params.txt`) from git checkouts at the refs above."""
    repos = {
        "nemo": ("NVIDIA/NeMo", nemo_git, NEMO_REF, ""),
        "mcore": ("NVIDIA/Megatron-LM", megatron_git, NEMO_MEGATRON_REF, ""),
        "lightning": ("Lightning-AI/pytorch-lightning", lightning_git, LIGHTNING_REF, "src/"),
    }

    def read(source: str, path: str) -> ast.Module:
        _, gitdir, ref, root = repos[source]
        return _source(gitdir, ref, root + path)

    def stamp(source: str, path: str, what: str) -> str:
        repo, gitdir, ref, root = repos[source]
        return _stamp(repo, gitdir, ref, root + path, what)

    return _nemo_list(read, stamp)


NEMO_WHEELS = ("nemo_toolkit-2.7.3", "megatron_core-0.16.1", "lightning-2.4.0")
"""The wheels of the NeMo 2.7.3 list (`nemo_strategy_params.v2.7.3.txt`). nemo-toolkit 2.7.3's metadata pins
lightning<=2.4.0,>2.2.1 and names megatron_core with no version (its code needs >= 0.14.0:
nemo/lightning/megatron_parallel.py); 0.16.1 is the newest megatron-core that installs on Python 3.11, so what
pip resolves it to here."""


def nemo_keys_from_wheels(nemo: str, mcore: str, lightning: str) -> list[str]:
    """The NeMo list from the three wheels (`NEMO_WHEELS`), each a .whl file (unzipped here) or an unzipped folder
    (then named by its folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        roots: dict[str, tuple[Path, str]] = {}
        for source, wheel in (("nemo", nemo), ("mcore", mcore), ("lightning", lightning)):
            folder = Path(tmp) / source
            folder.mkdir()
            roots[source] = _unpacked(wheel, folder)

        def read(source: str, path: str) -> ast.Module:
            return ast.parse((roots[source][0] / path).read_text())

        def stamp(source: str, path: str, what: str) -> str:
            return f"# {roots[source][1]} {path}: {what}"

        return _nemo_list(read, stamp, recipes=True)


_PARSER_FLAGS = """
import argparse, sys, typing, typing_extensions
typing.override = getattr(typing, "override", typing_extensions.override)
from megatron.training.arguments import add_megatron_arguments
parser = argparse.ArgumentParser(allow_abbrev=False)
add_megatron_arguments(parser)
print("\\n".join(sorted(o for o in parser._option_string_actions if o.startswith("--"))))
"""


def _unpacked(source: str, folder: Path) -> tuple[Path, str]:
    """(a folder holding megatron/, what it is): a git ref GITDIR@REF (archived), a wheel (unzipped) or a folder."""
    if "@" in source and not source.endswith(".whl"):
        gitdir, ref = source.rsplit("@", 1)
        archive = subprocess.run(["git", "-C", gitdir, "archive", ref, "megatron"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
        commit, date = _git(gitdir, "log", "-1", "--format=%H %cI", ref).split()
        return folder, f"NVIDIA/Megatron-LM {commit} ({ref}) {date}"
    if source.endswith(".whl"):
        with zipfile.ZipFile(source) as wheel:
            wheel.extractall(folder)
        digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()
        return folder, f"{Path(source).name} sha256 {digest}"
    return Path(source), f"source tree {source}"


def megatron_flags_from_parser(release: str, source: str) -> list[str]:
    """Every --flag that release's own `add_megatron_arguments` registers (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        root, origin = _unpacked(source, Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(root)}
        out = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", _PARSER_FLAGS], env=env, check=True, capture_output=True, text=True
        ).stdout
    header = f"# Megatron-LM {release}: {origin} megatron/training/arguments.py: add_megatron_arguments' option strings"
    return [header, *out.split()]


_TYRO_FLAGS = """
import sys, warnings
warnings.simplefilter("ignore")
import tyro, tyro.extras
import torchtitan.components.quantization.float8 as float8
from torchtitan.config.manager import ConfigManager, custom_registry

float8.has_cuda_capability = lambda major, minor: True  # the float8 configs build their converter on a GPU only

def walk(parser, out):
    for action in parser._actions:
        out.update(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action.choices, dict):  # a subparsers action (tyro's own argparse backend)
            for choice, sub in action.choices.items():
                out.add(choice)
                walk(sub, out)

manager, names = ConfigManager(), {"--module", "--config"}
for pair in sys.argv[1:]:
    module, function = pair.split(":")
    config, _ = manager._load_config(["--module", module, "--config", function])
    walk(tyro.extras.get_parser(type(config), default=config, registry=custom_registry), names)
print(tyro.__version__)
print("\\n".join(sorted(names)))
"""

TORCHTITAN03_CONFIGS = (
    "llama3:llama3_8b",
    "llama3:llama3_70b",
    "llama3:llama3_405b",
    "deepseek_v3:deepseek_v3_671b",
    "deepseek_v3:deepseek_v3_671b_float8",
    "llama3:llama3_debugmodel",
)
"""The config functions planner/launch/torchtitan_v03.py names, and the stand-in the real-code check uses for a
shape TorchTitan does not ship."""


def torchtitan03_flags(wheel: str) -> list[str]:
    """Every option string tyro's parser for v0.3.0's Trainer.Config registers (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        root, origin = _unpacked(wheel, Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(root)}
        args = [sys.executable, "-W", "ignore", "-c", _TYRO_FLAGS, *TORCHTITAN03_CONFIGS]
        tyro, *names = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout.split()
    header = (
        f"# TorchTitan v0.3.0: {origin} torchtitan/config/manager.py: ConfigManager's parser (tyro {tyro}) option"
        f" strings and subcommands for --module/--config {' '.join(TORCHTITAN03_CONFIGS)}"
    )
    return [header, *names]


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--nemo-wheels":
        (HERE / "nemo_strategy_params.v2.7.3.txt").write_text("\n".join(nemo_keys_from_wheels(*argv[1:4])) + "\n")
        return
    if argv and argv[0] == "--torchtitan03":
        (HERE / "torchtitan_flags.v0.3.0.txt").write_text("\n".join(torchtitan03_flags(argv[1])) + "\n")
        return
    if argv and argv[0] == "--megatron":
        for pair in argv[1::2]:
            release, source = pair.split("=", 1)
            lines = megatron_flags_from_parser(release, source)
            (HERE / f"megatron_lm_flags.{release}.txt").write_text("\n".join(lines) + "\n")
        return
    megatron_git, torchtitan_git, nemo_git, lightning_git = argv
    outputs = {
        f"megatron_lm_flags.{MEGATRON_REF}.txt": megatron_flags(megatron_git),
        "torchtitan_config_keys.txt": torchtitan_keys(torchtitan_git),
        "nemo_strategy_params.txt": nemo_keys(megatron_git, nemo_git, lightning_git),
    }
    for name, lines in outputs.items():
        (HERE / name).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
