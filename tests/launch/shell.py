"""Run an emitted command or sbatch script under bash with stub `torchrun`, `srun` and `scontrol`, and read back
what torchrun would get on one node: the shell, not a parser of ours, expands the per-node values."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

_STUBS = {
    "torchrun": "#!/bin/sh\nprintf '%s\\0' \"$@\"\n",
    "srun": '#!/bin/sh\nexec "$@"\n',
    "scontrol": "#!/bin/sh\necho node0\n",
}


def _bin() -> str:
    folder = Path(tempfile.gettempdir()) / f"planner-launch-stubs-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    for name, text in _STUBS.items():
        path = folder / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            path.chmod(0o755)
    return str(folder)


def torchrun_argv(text: str, node_rank: int) -> list[str]:
    """torchrun's arguments when `text` (a command line or an sbatch script) runs on node `node_rank`."""
    env = {
        "PATH": f"{_bin()}:{os.environ['PATH']}",
        "NODE_RANK": str(node_rank),
        "SLURM_NODEID": str(node_rank),
        "SLURM_JOB_ID": "1",
        "SLURM_JOB_NODELIST": "node[0-1]",
        "MASTER_ADDR": "node0",
        "MASTER_PORT": "29500",
    }
    out = subprocess.run(["bash", "-c", text], env=env, capture_output=True, check=True).stdout
    return out.decode().split("\0")[:-1]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def processes_per_node(text: str, nnodes: int) -> list[int]:
    """--nproc-per-node on every node (the first, last and one middle node are run; the others equal the middle)."""
    first, last = (int(option(torchrun_argv(text, r), "--nproc-per-node")) for r in (0, nnodes - 1))
    middle = int(option(torchrun_argv(text, nnodes // 2), "--nproc-per-node")) if nnodes > 2 else first
    return [first] + [middle] * max(nnodes - 2, 0) + ([last] if nnodes > 1 else [])
