"""The command line: plan (table, JSON, SVG), validate, estimate; errors exit 2 with a message."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()


def test_plan_json_and_svg(tmp_path: Path) -> None:
    svg = tmp_path / "best.svg"
    result = runner.invoke(app, ["plan", "--gpus", "64", "--batch", "64", "--top-k", "2", "--json", "--svg", str(svg)])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert len(body["plans"]) == 2 and body["plans"][0]["rank"] == 1
    pp = body["plans"][0]["layout"]["pp"]
    assert svg.read_text().count('class="rank"') == pp


def test_plan_table_and_estimate() -> None:
    result = runner.invoke(app, ["plan", "--gpus", "64", "--batch", "64", "--top-k", "2"])
    assert result.exit_code == 0 and "Ranked plans" in result.output and "baseline" in result.output
    result = runner.invoke(app, ["estimate", "--gpus", "64", "--batch", "64", "--tp", "8", "--pp", "8", "--dp", "1"])
    assert result.exit_code == 0 and "step" in result.output and "fits" in result.output


def test_bad_input_exits_2_with_the_field() -> None:
    result = runner.invoke(app, ["plan", "--model", "nope"])
    assert result.exit_code == 2 and "nope" in result.output
    result = runner.invoke(app, ["plan", "--gpus", "64", "--batch", "64", "-c", "tq=2"])
    assert result.exit_code == 2 and "constraints.tq" in result.output
