"""Megatron-LM logs: the argument dump, the padded-vocabulary line, the memory report and the iteration lines.

Formats (Megatron-LM core_v0.15.0):
- `megatron/training/arguments.py` `_print_args`: `---... arguments ---...`, one `  name ..... value` line per
  argument (dots pad the name to 48 characters), `---... end of arguments ---...`; printed at the end of
  `validate_args`, so derived values (data_parallel_size, ffn_hidden_size, virtual_pipeline_model_parallel_size)
  are filled in.
- `megatron/training/tokenizer/tokenizer.py` `_vocab_size_with_padding`:
  ` > padded vocab (size: V) with D dummy tokens (new size: P)`.
- `megatron/training/utils.py` `report_memory`: `[Rank r] (after N iterations) memory (MB) | allocated: ... |
  max allocated: ... | reserved: ... | max reserved: ...` (MB = 2**20 bytes), once, after the first interval.
- `megatron/training/training.py` `training_log`: ` [date] iteration N/ M | consumed samples: ... | elapsed time
  per iteration (ms): X | ...` every `--log-interval` iterations (X: mean over the interval).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from planner.observe.megatron_args import megatron_request
from planner.observe.observation import LogFormat, Observation, refuse
from planner.observe.timing import Interval, steady_state
from planner.units import GIB, MIB

__all__ = ["ARGS_START", "ITERATION", "iteration_intervals", "parse_megatron", "peak_reserved_gib"]

ARGS_START = re.compile(r"^-{8,} arguments -{8,}\s*$")
_ARGS_END = re.compile(r"^-{8,} end of arguments -{8,}\s*$")
_ARG = re.compile(r"^  (\w+) (?:\.+ )?(.*)$")
ITERATION = re.compile(r"iteration\s+(\d+)/\s*(\d+) \|.*?elapsed time per iteration \(ms\): ([0-9.]+) \|")
_PADDED_VOCAB = re.compile(r"> padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)")
_MEMORY = re.compile(r"\[Rank \d+\] \(after \d+ iterations\) memory \(MB\) \|.*\| max reserved: ([0-9.]+)")
_WHERE = "argument dump"


def _literal(text: str) -> Any:
    """A printed argument value: None, True/False, a number, a list, else the string."""
    text = text.strip()
    if text in ("None", "True", "False") or text[:1] in "[(-0123456789":
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
    return text


def _arguments(lines: Sequence[str]) -> dict[str, Any]:
    starts = [i for i, line in enumerate(lines) if ARGS_START.match(line)]
    if not starts:
        refuse("no Megatron-LM argument dump ('---- arguments ----') in the log")
    if len(starts) > 1:
        refuse(f"{len(starts)} argument dumps in the log: it holds more than one run; split it and import each run")
    args: dict[str, Any] = {}
    for line in lines[starts[0] + 1 :]:
        if _ARGS_END.match(line):
            return args
        if match := _ARG.match(line):
            args[match.group(1)] = _literal(match.group(2))
    return refuse("the argument dump has no '---- end of arguments ----' line (a truncated log?)")


def iteration_intervals(lines: Sequence[str]) -> list[Interval]:
    """The `training_log` lines as intervals; refuses a log whose total iterations (N/M's M) change."""
    intervals: list[Interval] = []
    totals: set[int] = set()
    for line in lines:
        if match := ITERATION.search(line):
            intervals.append(Interval(int(match.group(1)), float(match.group(3)) / 1000.0))
            totals.add(int(match.group(2)))
    if len(totals) > 1:
        refuse(f"the iteration lines count to different totals {sorted(totals)}: the log holds more than one run")
    return intervals


def peak_reserved_gib(lines: Sequence[str]) -> float | None:
    """The largest `max reserved` of the memory reports, in GiB; None without a report."""
    reserved = [float(m.group(1)) for line in lines if (m := _MEMORY.search(line))]
    return max(reserved) * MIB / GIB if reserved else None


def _vocab(lines: Sequence[str], args: dict[str, Any]) -> int:
    padded = [int(m.group(1)) for line in lines if (m := _PADDED_VOCAB.search(line))]
    if padded:
        return padded[0]
    if isinstance(args.get("padded_vocab_size"), int):
        return int(args["padded_vocab_size"])
    return refuse("vocabulary size not in the log: no ' > padded vocab' line and padded_vocab_size is None")


def parse_megatron(lines: Sequence[str], *, num_gpus: int | None, skip: int | None, file: str) -> Observation:
    """The run a Megatron-LM log records. `num_gpus` overrides the dump's world_size."""
    args = _arguments(lines)
    world_size = num_gpus if num_gpus is not None else args.get("world_size")
    if not isinstance(world_size, int) or world_size < 1:
        refuse("world_size not in the argument dump; give --num-gpus")
    timing = steady_state(iteration_intervals(lines), skip)
    request, notes = megatron_request(
        args, where=_WHERE, world_size=world_size, vocab_size=_vocab(lines, args), framework="megatron"
    )
    return Observation(
        log_format=LogFormat.MEGATRON,
        request=request,
        timing=timing,
        peak_memory_gib=peak_reserved_gib(lines),
        file=file,
        notes=notes,
    )
