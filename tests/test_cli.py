"""The command line: plan (table, JSON, SVG), validate, estimate; parity with the API (model forms, bodies, --server);
exit 1 when nothing fits, 2 on invalid input (one line), 3 when the service is unreachable; help at 80 columns."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import planner.cli
from api.main import create_app
from api.schemas import HfConfigModel
from planner.calibration import accuracy
from planner.calibration.accuracy import load_bands
from planner.cli import app
from planner.client import PlannerClient
from planner.presets import get_preset

runner = CliRunner()


def test_plan_table_shows_the_module_set_a_plan_reruns() -> None:
    """A plan running a recipe's module set says so in the table (the list in brackets is text, not rich markup)."""
    args = ["plan", "--model", "mixtral-8x7b", "--profile", "dgx-h100", "--gpus", "64", "--batch", "128"]
    result = runner.invoke(
        app, [*args, "-c", "tp=2", "-c", "pp=2", "-c", "cp=1", "--top-k", "1"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "selective[layernorm,moe,moe_act]" in result.output


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
    assert "base today" in result.output and "base 2021" in result.output
    assert "baseline on today's runtime" in result.output and "paper's 2021 baseline" in result.output
    result = runner.invoke(app, ["estimate", "--gpus", "64", "--batch", "64", "--tp", "8", "--pp", "8", "--dp", "1"])
    assert result.exit_code == 0 and "step" in result.output and "fits" in result.output


def test_plan_and_estimate_say_how_far_the_model_was_from_published_runs() -> None:
    """Both print the accuracy band's sentence (A100 dense by default); a kind without published runs says so."""
    dense = next(b for b in load_bands() if (b.gpu_kind, b.workload.value) == ("A100", "dense"))
    wide = {"COLUMNS": "400"}  # the sentence on one line
    result = runner.invoke(app, ["plan", "--gpus", "64", "--batch", "64", "--top-k", "1"], env=wide)
    assert result.exit_code == 0 and f"checked against published runs: {dense.text}" in result.output
    result = runner.invoke(
        app, ["estimate", "--gpus", "64", "--batch", "64", "--tp", "8", "--pp", "8", "--dp", "1"], env=wide
    )
    assert result.exit_code == 0 and f"checked against published runs: {dense.text}" in result.output
    h200 = ["estimate", "--profile", "hgx-h200", "--gpus", "64", "--batch", "64", "--tp", "8", "--pp", "8", "--dp", "1"]
    result = runner.invoke(app, h200, env=wide)
    assert result.exit_code == 0 and "checked against no published run of this GPU kind and workload" in result.output


def test_validate_writes_the_accuracy_bands_answers_quote(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`planner validate --write-bands` stores the report's bands where answers read them."""
    path = tmp_path / "bands.json"
    monkeypatch.setattr(accuracy, "BANDS_FILE", path)
    try:
        result = runner.invoke(app, ["validate", "--write-bands", "--json"])
        assert result.exit_code == 0, result.output
        written = json.loads(path.read_text())["bands"]
        assert written == json.loads(result.output)["bands"]
        assert load_bands() == load_bands(tmp_path / "bands.json") and len(written) >= 10
    finally:
        load_bands.cache_clear()


def test_bad_input_exits_2_with_the_field() -> None:
    result = runner.invoke(app, ["plan", "--model", "nope"])
    assert result.exit_code == 2 and "nope" in result.output
    result = runner.invoke(app, ["plan", "--gpus", "64", "--batch", "64", "-c", "tq=2"])
    assert result.exit_code == 2 and "constraints.tq" in result.output


# --- parity with the API: model forms, exit codes, JSON bodies, --server, help ---

LLAMA_HF: dict[str, Any] = HfConfigModel.model_fields["hf_config"].json_schema_extra["examples"][0]  # type: ignore[index]
"""The Llama 3 8B config.json the API documents as its example."""
CLUSTER = {"profile": "dgx-a100-80gb", "num_gpus": 64}
TRAINING = {"global_batch_size": 64, "precision": "bf16"}
JOB = ["--gpus", "64", "--batch", "64"]
LAYOUT = {
    "tp": 8,
    "pp": 4,
    "dp": 2,
    "cp": 1,
    "ep": 1,
    "vp": 1,
    "micro_batch_size": 1,
    "recompute": "selective",
    "sequence_parallel": True,
    "zero_stage": 1,
}
LAYOUT_ARGS = ["--tp", "8", "--pp", "4", "--dp", "2"]
"""LAYOUT as options: the CLI's other defaults (selective, zero 1, sequence parallel when tp > 1) fill the rest."""


@pytest.fixture(scope="module")
def api() -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


@pytest.fixture
def shape_file(tmp_path: Path) -> Path:
    path = tmp_path / "shape.json"
    path.write_text(json.dumps(get_preset("megatron-1.7b").model.model_dump(mode="json")))
    return path


@pytest.fixture
def hf_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_HF))
    return path


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in body.items() if k != "cached"}
    if "search" in body:
        body["search"] = {k: v for k, v in body["search"].items() if k != "elapsed_ms"}
    return body


def _api_body(api: TestClient, route: str, request: dict[str, Any]) -> dict[str, Any]:
    response = api.post(route, json=request)
    assert response.status_code == 200, response.text
    return _comparable(response.json())


def _cli_json(args: list[str], exit_code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == exit_code, result.output
    return _comparable(json.loads(result.stdout))


def _model_forms(shape_file: Path, hf_file: Path) -> list[tuple[list[str], dict[str, Any]]]:
    shape = json.loads(shape_file.read_text())
    return [
        (["--model", "llama3-8b", "--seq-length", "4096"], {"preset": "llama3-8b", "seq_length": 4096}),
        (["--hf-config", str(hf_file), "--seq-length", "2048"], {"hf_config": LLAMA_HF, "seq_length": 2048}),
        (["--hf-config", str(hf_file)], {"hf_config": LLAMA_HF}),
        (["--model-file", str(shape_file), "--seq-length", "1024"], {**shape, "seq_length": 1024}),
        (["--model-file", str(shape_file)], shape),
    ]


def test_plan_json_equals_the_api_body_for_every_model_form(api: TestClient, shape_file: Path, hf_file: Path) -> None:
    for args, model in _model_forms(shape_file, hf_file):
        cli = _cli_json(["plan", *args, *JOB, "--top-k", "3", "-c", "recompute=selective,full"])
        request = {
            "model": model,
            "cluster": CLUSTER,
            "training": TRAINING,
            "constraints": {"recompute": ["selective", "full"]},
            "top_k": 3,
        }
        assert cli == _api_body(api, "/v1/plan", request), args
        assert cli["plans"] and "num_microbatches" in cli["plans"][0]["layout"]


def test_estimate_json_equals_the_api_body_for_every_model_form(
    api: TestClient, shape_file: Path, hf_file: Path
) -> None:
    for args, model in _model_forms(shape_file, hf_file):
        cli = _cli_json(["estimate", *args, *JOB, *LAYOUT_ARGS])
        request = {"model": model, "cluster": CLUSTER, "training": TRAINING, "layout": LAYOUT}
        assert cli == _api_body(api, "/v1/estimate", request), args
        assert cli["layout"]["num_microbatches"] == 64 // 2 and cli["fits"] is True


def test_estimate_layout_options_the_api_has(api: TestClient) -> None:
    args = ["estimate", *JOB, *LAYOUT_ARGS, "--layers-per-stage", "23,25,25,23", "--num-microbatches", "32"]
    request = {"model": {"preset": "gpt3-175b"}, "cluster": CLUSTER, "training": TRAINING}
    layout = {**LAYOUT, "layers_per_stage": [23, 25, 25, 23], "num_microbatches": 32}
    assert _cli_json(args) == _api_body(api, "/v1/estimate", {**request, "layout": layout})
    body = _cli_json([*args[:-1], "5"], exit_code=1)
    assert [v["rule"] for v in body["violations"]] == ["num_microbatches"]
    _one_line_error([*args[:-4], "--layers-per-stage", "48,x"], "--layers-per-stage", "48,x")
    _one_line_error([*args[:-4], "--layers-per-stage", "0,96"], "layout.layers_per_stage.0")


def test_seq_length_changes_the_estimate(shape_file: Path) -> None:
    short = _cli_json(["estimate", "--model-file", str(shape_file), "--seq-length", "1024", *JOB, *LAYOUT_ARGS])
    long = _cli_json(["estimate", "--model-file", str(shape_file), "--seq-length", "4096", *JOB, *LAYOUT_ARGS])
    assert long["estimate"]["step_time_s"] > short["estimate"]["step_time_s"]


def test_estimate_exits_1_on_a_layout_that_does_not_fit_or_breaks_a_rule(api: TestClient) -> None:
    result = runner.invoke(app, ["estimate", *JOB, "--tp", "8", "--pp", "8", "--dp", "16"])
    assert result.exit_code == 1 and "DOES NOT FIT" in result.output
    assert "[world_size] tp(8) * pp(8) * dp(16) * cp(1) = 1024 != num_gpus(64)" in result.output
    result = runner.invoke(app, ["estimate", *JOB, "--tp", "1", "--pp", "8", "--dp", "8"])
    assert result.exit_code == 1 and "[fits_memory] peak memory" in result.output
    body = _cli_json(["estimate", *JOB, "--tp", "1", "--pp", "8", "--dp", "8"], exit_code=1)
    request = {"model": {"preset": "gpt3-175b"}, "cluster": CLUSTER, "training": TRAINING}
    layout = {**LAYOUT, "tp": 1, "pp": 8, "dp": 8, "sequence_parallel": False}
    assert body == _api_body(api, "/v1/estimate", {**request, "layout": layout})
    assert body["fits"] is False and [v["rule"] for v in body["violations"]] == ["fits_memory"]


def test_estimate_sequence_parallel_defaults_to_tp_above_1() -> None:
    small = ["estimate", "--model", "megatron-1.7b", "--gpus", "8", "--batch", "8", "--pp", "1"]
    body = _cli_json([*small, "--tp", "1", "--dp", "8"])
    assert body["fits"] and body["layout"]["sequence_parallel"] is False
    body = _cli_json([*small, "--tp", "2", "--dp", "4"])
    assert body["fits"] and body["layout"]["sequence_parallel"] is True
    body = _cli_json([*small, "--tp", "2", "--dp", "4", "--no-sequence-parallel"])
    assert body["fits"] and body["layout"]["sequence_parallel"] is False
    body = _cli_json([*small, "--tp", "1", "--dp", "8", "--sequence-parallel"], exit_code=1)
    assert [v["rule"] for v in body["violations"]] == ["sequence_parallel_needs_tp"]


def test_plan_exits_1_when_nothing_fits_after_the_diagnosis() -> None:
    result = runner.invoke(app, ["plan", "--gpus", "1", "--batch", "8"])
    assert result.exit_code == 1
    assert "nothing fits: the least-memory layout needs" in result.output
    body = _cli_json(["plan", "--gpus", "1", "--batch", "8"], exit_code=1)
    assert body["plans"] == [] and body["diagnosis"]["least_memory_gib"] > body["diagnosis"]["capacity_gib"]


def _one_line_error(args: list[str], *needles: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_invalid_input_exits_2_with_one_line_naming_the_field(
    command: str, tmp_path: Path, shape_file: Path, hf_file: Path
) -> None:
    _one_line_error([command, "--model", "nope"], "model.preset", "nope")
    _one_line_error([command, "--model", "llama3-8b", "--hf-config", str(hf_file)], "--model and --hf-config")
    _one_line_error([command, "--hf-config", str(hf_file), "--model-file", str(shape_file)], "--model-file")
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": ')
    _one_line_error([command, "--hf-config", str(bad)], "--hf-config", "bad.json", "JSON")
    _one_line_error([command, "--model-file", str(bad)], "--model-file", "bad.json", "JSON")
    shape = json.loads(shape_file.read_text())
    del shape["num_layers"]
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps(shape))
    _one_line_error([command, "--model-file", str(missing)], "model.num_layers", "required")
    _one_line_error([command, "--model-file", str(hf_file)], "model.")
    pattern_only = tmp_path / "pattern.json"
    pattern_only.write_text(json.dumps({**json.loads(shape_file.read_text()), "sliding_window_pattern": 2}))
    _one_line_error(
        [command, "--model-file", str(pattern_only)], "error: model: sliding_window_pattern(2) needs sliding_window"
    )
    wrong = tmp_path / "mistral.json"
    wrong.write_text(json.dumps({**LLAMA_HF, "model_type": "not-a-family"}))
    _one_line_error([command, "--hf-config", str(wrong)], "model.hf_config.model_type")
    _one_line_error([command, "--seq-length", "99999999"], "model.seq_length", "4194304")
    _one_line_error([command, "--profile", "nope"], "cluster.profile")
    result = runner.invoke(app, [command, "--model-file", str(tmp_path / "absent.json")])
    assert result.exit_code == 2 and "absent.json" in result.output and "Traceback" not in result.output


def _served(api: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """--server URL reaches the in-process app through the CLI's own client, over an httpx transport."""

    def forward(request: httpx.Request) -> httpx.Response:
        answer = api.request(request.method, request.url.path, content=request.content, headers=request.headers)
        return httpx.Response(answer.status_code, content=answer.content, headers={"content-type": "application/json"})

    def client(url: str) -> PlannerClient:
        return PlannerClient(url, transport=httpx.MockTransport(forward))

    monkeypatch.setattr(planner.cli, "PlannerClient", client)


def test_server_prints_the_same_table_as_a_local_run(api: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    plan_args = ["plan", *JOB, "--top-k", "3"]
    estimate_args = ["estimate", *JOB, *LAYOUT_ARGS]
    wrong_args = ["estimate", *JOB, "--tp", "8", "--pp", "8", "--dp", "16"]
    local = [runner.invoke(app, args) for args in (plan_args, estimate_args, wrong_args)]
    _served(api, monkeypatch)
    served = [
        runner.invoke(app, [*args, "--server", "http://planner.test"])
        for args in (plan_args, estimate_args, wrong_args)
    ]
    assert [r.exit_code for r in local] == [r.exit_code for r in served] == [0, 0, 1]
    assert "Ranked plans" in served[0].output and "{" not in served[0].output
    no_ms = re.compile(r"\d+ ms\)")
    assert no_ms.sub("ms)", served[0].output) == no_ms.sub("ms)", local[0].output)
    assert served[1].output == local[1].output and served[2].output == local[2].output
    served_json = _cli_json([*plan_args, "--server", "http://planner.test"])
    assert served_json == _cli_json(plan_args)


def test_server_errors_exit_2_for_bad_input_and_3_when_unreachable(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _served(api, monkeypatch)
    _one_line_error(["plan", *JOB, "-c", "tq=2", "--server", "http://planner.test"], "422", "constraints.tq")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    monkeypatch.setattr(
        planner.cli, "PlannerClient", lambda url: PlannerClient(url, transport=httpx.MockTransport(refuse))
    )
    result = runner.invoke(app, ["estimate", "--server", "http://planner.test"])
    assert result.exit_code == 3 and "cannot reach the service" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_help_at_80_columns_shows_every_option_name_in_full(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert "…" not in result.output and max(map(len, result.output.splitlines())) <= 80
    group: Any = typer.main.get_command(app)
    names = [n for p in group.commands[command].params for n in (*p.opts, *p.secondary_opts) if n.startswith("--")]
    assert {"--hf-config", "--model-file", "--seq-length", "--server", "--json"} <= set(names)
    for name in names:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", result.output), name
    assert "Exit status" in result.output


def test_framework_option_reaches_the_rules() -> None:
    """--framework picks the rule set; Megatron (the default) refuses Megatron-FSDP with a pipeline."""
    layout = ["--tp", "8", "--pp", "2", "--dp", "4", "--zero-stage", "3"]
    small = ["estimate", "--model", "llama3-70b", "--profile", "dgx-h100", "--gpus", "64", "--batch", "256"]
    body = _cli_json([*small, *layout], exit_code=1)
    assert "megatron_fsdp_needs_pp_1" in [v["rule"] for v in body["violations"]]
    body = _cli_json([*small, *layout, "--framework", "torchtitan"])
    assert body["fits"] and not body["violations"]
    plan = runner.invoke(app, ["plan", *small[1:], "--top-k", "1", "--framework", "nemo"])
    assert plan.exit_code == 0 and "for nemo (2.7.3)" in plan.output


def test_framework_version_option_picks_the_release() -> None:
    """core_v0.15.0 refuses tp 16 over Llama 3 70B's 8 query groups; the default (core_v0.19.2) accepts it."""
    small = ["estimate", "--model", "llama3-70b", "--profile", "dgx-h100", "--gpus", "64", "--batch", "256"]
    layout = ["--tp", "16", "--pp", "1", "--dp", "4", "--sequence-parallel"]
    older = runner.invoke(app, [*small, *layout, "--framework-version", "core_v0.15.0", "--json"])
    assert "query_groups_split" in [v["rule"] for v in json.loads(older.output)["violations"]]
    newest = runner.invoke(app, [*small, *layout, "--json"])
    assert "query_groups_split" not in [v["rule"] for v in json.loads(newest.output)["violations"]]
    bad = runner.invoke(app, [*small, *layout, "--framework-version", "core_v0.14.0"])
    assert bad.exit_code == 2 and "accepted: core_v0.19.2, core_v0.16.1, core_v0.15.0" in bad.output


def test_estimate_training_options_the_api_has(api: TestClient) -> None:
    """--fp8-recipe and --grad-reduce-in-fp32/--grad-reduce-in-16bit send the API's training fields; a recipe the GPU
    cannot run is refused naming the field."""
    job = ["--gpus", "64", "--batch", "64", "--precision", "fp8"]
    args = [
        "estimate",
        *job,
        "--profile",
        "gb200-nvl72",
        "--fp8-recipe",
        "mxfp8",
        "--grad-reduce-in-16bit",
        *LAYOUT_ARGS,
    ]
    request = {
        "model": {"preset": "gpt3-175b"},
        "cluster": {"profile": "gb200-nvl72", "num_gpus": 64},
        "training": {"global_batch_size": 64, "precision": "fp8", "fp8_recipe": "mxfp8", "grad_reduce_in_fp32": False},
        "layout": LAYOUT,
    }
    body = _cli_json(args)
    assert body == _api_body(api, "/v1/estimate", request)
    fp32 = _cli_json([*args[:-7], "--grad-reduce-in-fp32", *LAYOUT_ARGS])
    gradients = [b["estimate"]["memory"]["breakdown_gib"]["gradients"] for b in (fp32, body)]
    assert gradients[0] > gradients[1]
    _one_line_error(
        ["estimate", *job, "--profile", "dgx-h100", "--fp8-recipe", "mxfp8", *LAYOUT_ARGS], "training.fp8_recipe"
    )


def test_runtime_option_sends_the_apis_runtime_features(api: TestClient) -> None:
    """--runtime KEY=VALUE (repeatable) is the API's training.runtime; switches read true/false; a bad key or value
    is refused naming the field, a malformed item naming the option."""
    job = ["--model", "mixtral-8x7b", "--seq-length", "4096", "--gpus", "64", "--batch", "512", "--profile", "dgx-h100"]
    layout = ["--tp", "1", "--pp", "4", "--dp", "16", "--ep", "8", "--vp", "2", "--zero-stage", "1"]
    runtime = ["--runtime", "moe_dispatcher=deepep", "--runtime", "moe_a2a_overlap=true"]
    body = _cli_json(["estimate", *job, *runtime, *layout])
    request = {
        "model": {"preset": "mixtral-8x7b", "seq_length": 4096},
        "cluster": {"profile": "dgx-h100", "num_gpus": 64},
        "training": {"global_batch_size": 512, "runtime": {"moe_dispatcher": "deepep", "moe_a2a_overlap": True}},
        "layout": {
            "tp": 1, "pp": 4, "dp": 16, "cp": 1, "ep": 8, "vp": 2, "micro_batch_size": 1,
            "recompute": "selective", "sequence_parallel": False, "zero_stage": 1,
        },
    }  # fmt: skip
    assert body == _api_body(api, "/v1/estimate", request)
    plain = _cli_json(["estimate", *job, *layout])
    assert body["estimate"]["step_time_s"] < plain["estimate"]["step_time_s"]
    _one_line_error(["estimate", *job, "--runtime", "moe_dispatcher=nccl", *layout], "moe_dispatcher")
    _one_line_error(["estimate", *job, "--runtime", "no_such_feature=true", *layout], "no_such_feature")
    _one_line_error(["estimate", *job, "--runtime", "moe_a2a_overlap", *layout], "runtime", "KEY=VALUE")


def test_training_option_sets_the_apis_other_training_fields(api: TestClient) -> None:
    """--training KEY=VALUE (repeatable) sets a training field without an option of its own, its value read as
    JSON or kept as text: the body is the API's, the answer changes as the field says (PyTorch FSDP's band, the
    dropout masks' memory); a field with its own option is refused naming that option, a bad key naming the
    field."""
    job = ["--model", "llama3-8b", "--gpus", "8", "--batch", "64", "--profile", "dgx-h100", "--framework", "torchtitan"]
    layout = ["--tp", "1", "--pp", "1", "--dp", "8", "--zero-stage", "3", "--recompute", "none"]
    fields = ["--training", "gradient_layout=pytorch_fsdp", "--training", "hidden_dropout=0.1"]
    body = _cli_json(["estimate", *job, *fields, *layout])
    request = {
        "model": {"preset": "llama3-8b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 8},
        "training": {"global_batch_size": 64, "gradient_layout": "pytorch_fsdp", "hidden_dropout": 0.1},
        "layout": {
            "tp": 1, "pp": 1, "dp": 8, "cp": 1, "micro_batch_size": 1, "recompute": "none",
            "sequence_parallel": False, "zero_stage": 3,
        },
        "framework": "torchtitan",
    }  # fmt: skip
    assert body == _api_body(api, "/v1/estimate", request)
    assert body["accuracy"]["workload"] == "dense_fsdp"
    plain = _cli_json(["estimate", *job, *layout])
    assert plain["accuracy"]["workload"] == "dense"
    assert body["estimate"]["memory"]["peak_gib"] > plain["estimate"]["memory"]["peak_gib"]  # dropout masks kept
    _one_line_error(["estimate", *job, "--training", "precision=fp8", *layout], "training.precision", "--precision")
    _one_line_error(["estimate", *job, "--training", "no_such_field=1", *layout], "no_such_field")
    _one_line_error(["estimate", *job, "--training", "gradient_layout=torch", *layout], "gradient_layout")
    _one_line_error(["estimate", *job, "--training", "hidden_dropout", *layout], "training", "KEY=VALUE")


def test_runtime_list_fields_take_comma_separated_items(api: TestClient) -> None:
    """--runtime recompute_modules=a,b is the API's list; a module the model lacks is a violation naming the rule."""
    job = [
        "--model",
        "qwen3-30b-a3b",
        "--seq-length",
        "4096",
        "--gpus",
        "16",
        "--batch",
        "256",
        "--profile",
        "dgx-h100",
    ]
    layout = ["--tp", "1", "--pp", "1", "--dp", "16", "--ep", "16", "--recompute", "selective", "--zero-stage", "1"]
    body = _cli_json(["estimate", *job, "--runtime", "recompute_modules=layernorm, moe_act", *layout])
    request = {
        "model": {"preset": "qwen3-30b-a3b", "seq_length": 4096},
        "cluster": {"profile": "dgx-h100", "num_gpus": 16},
        "training": {"global_batch_size": 256, "runtime": {"recompute_modules": ["layernorm", "moe_act"]}},
        "layout": {
            "tp": 1, "pp": 1, "dp": 16, "cp": 1, "ep": 16, "micro_batch_size": 1, "recompute": "selective",
            "sequence_parallel": False, "zero_stage": 1,
        },
    }  # fmt: skip
    assert body == _api_body(api, "/v1/estimate", request)
    single = _cli_json(["estimate", *job, "--runtime", "recompute_modules=moe_act", *layout])
    assert single["violations"] == [] and single["estimate"]["step_time_s"] < body["estimate"]["step_time_s"]
