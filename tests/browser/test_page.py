"""The web page in a real browser: Playwright driving Debian's Chromium against the live service.

Skipped only when no Chromium is installed and PLANNER_REQUIRE_BROWSER is unset (.ci/run installs
Chromium and sets it); screenshots go to test-output/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.localserver import local_service
from planner.calibration.accuracy import load_bands
from planner.specs import Precision

CHROMIUM = os.environ.get("PLANNER_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
OUTPUT = Path(__file__).resolve().parents[2] / "test-output"
REQUIRED = bool(os.environ.get("PLANNER_REQUIRE_BROWSER"))  # set by .ci/run: CI must not skip these
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED, reason="no Chromium on this machine (apt-get install chromium)"
)


WRITE_TOKEN = "page-test-token-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("page") / "planner.db"
    with local_service(env={"PLANNER_DB_PATH": str(db), "PLANNER_WRITE_TOKENS": f"page:{WRITE_TOKEN}"}) as url:
        yield url


@pytest.fixture(scope="module")
def page(server: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    OUTPUT.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        tab = browser.new_page(viewport={"width": 1280, "height": 1400})
        tab.goto(server + "/")
        tab.wait_for_selector('#model-preset option[value="gpt3-175b"]', state="attached")
        yield tab
        browser.close()


LLAMA_HF_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}


def _fill(  # type: ignore[no-untyped-def]
    page,
    *,
    kind: str = "preset",
    preset: str = "gpt3-175b",
    hf_config: dict[str, Any] | None = None,
    seq_length: str = "",
    profile: str = "dgx-a100-80gb",
    gpus: str = "1024",
    batch: str = "1536",
    train_tokens: str = "",
    objective: str = "step_time",
    top_k: str = "10",
    tp: str = "",
    recompute: tuple[str, ...] = ("none", "selective", "full"),
    framework: str = "megatron",
    framework_version: str = "",
    precision: str = "bf16",
) -> None:
    """Set every field the tests use (the page is shared by the module's tests)."""
    page.check(f'input[name="model-kind"][value="{kind}"]')
    if kind == "preset":
        page.select_option("#model-preset", preset)
    if kind == "hf":
        page.fill("#hf-config", json.dumps(hf_config or LLAMA_HF_CONFIG))
    if kind != "shape":
        page.fill("#model-seq-length", seq_length)
    page.select_option("#profile", profile)
    page.fill("#num_gpus", gpus)
    page.fill("#global_batch_size", batch)
    page.select_option("#precision", precision)
    page.fill("#train_tokens", train_tokens)
    page.select_option("#objective", objective)
    page.select_option("#framework", framework)
    page.fill("#framework_version", framework_version)
    page.fill("#top_k", top_k)
    page.fill("#pin-tp", tp)
    page.fill("#pin-pp", "")
    for value in ("none", "selective", "full"):
        page.set_checked(f'input[name="recompute"][value="{value}"]', value in recompute)


def _submit(page) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Click Plan; return the JSON body the page posted once its answer is on screen (or refused)."""
    with page.expect_request(lambda r: r.url.endswith("/v1/plan") and r.method == "POST") as sent:
        page.click("#plan-button")
    page.wait_for_function("/^(done|refused)/.test(document.querySelector('#status').textContent)")
    body: dict[str, Any] = sent.value.post_data_json
    return body


def test_plan_gpt3_on_1024_a100s(page) -> None:  # type: ignore[no-untyped-def]
    _fill(page, preset="gpt3-175b", profile="dgx-a100-80gb", gpus="1024", batch="1536", train_tokens="300B")
    _submit(page)
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    ranks = page.locator("#plans tbody tr").evaluate_all("rows => rows.map(r => r.dataset.rank)")
    assert ranks[:3] == ["1", "2", "3"] and ranks[-2:] == ["baseline-modern", "baseline"]
    summary = page.locator("#summary").inner_text()
    assert "on today's runtime" in summary and "as the paper ran it in 2021" in summary
    dense = next(b for b in load_bands() if (b.gpu_kind, b.workload.value) == ("A100", "dense"))
    assert f"Checked against published runs: {dense.text}." in summary
    page.click('#plans tbody tr[data-rank="1"]')
    page.wait_for_selector("#timeline svg .rank")
    layout = page.locator('#plans tbody tr[data-rank="1"] td').nth(2).inner_text()
    pp = int(re.search(r"pp(\d+)", layout).group(1))  # type: ignore[union-attr]
    assert page.locator("#timeline svg .rank").count() == pp
    assert page.locator("#timeline svg .pass.f").count() > 0
    assert page.locator("#memory .capacity-line").count() == 1
    assert "80 GiB" in (page.locator("#memory .capacity-label").text_content() or "")
    assert page.locator("#memory .segment").count() == 5
    assert "torchrun" in page.locator("#launch pre").first.inner_text()
    assert page.locator("#launch .launch-notes").first.inner_text().startswith("Smoke test on mock data")
    assert "faster than the rule of thumb" in page.locator("#summary").inner_text()
    assert page.locator("#model-name").inner_text() == "GPT-3 175B"
    assert "96 layers" in page.locator("#model-shape").inner_text()
    assert "174.6 B parameters in total" in page.locator("#model-params").inner_text()
    headers = page.locator("#plans thead th").all_inner_texts()
    assert headers[-2:] == ["days to train", "GPU-hours"]
    days = page.locator('#plans tbody tr[data-rank="1"] td').nth(7).inner_text()
    assert 1 < float(days) < 100  # 300B tokens at ~175K tokens/s
    page.screenshot(path=str(OUTPUT / "page-plan.png"), full_page=True)


def test_memory_numbers_are_visible_text(page) -> None:  # type: ignore[no-untyped-def]
    # the plan selected by the previous test
    total = page.locator("#memory .memory-total")
    assert total.is_visible()
    peak = float(re.search(r"peak (\d+\.\d) GiB / 80 GiB capacity", total.inner_text()).group(1))  # type: ignore[union-attr]
    rows = page.locator("#memory .memory-table tr")
    assert rows.count() == 5
    parts = []
    for i in range(5):
        row = rows.nth(i)
        assert row.is_visible()
        parts.append(float(re.search(r"([\d.]+) GiB", row.inner_text()).group(1)))  # type: ignore[union-attr]
    assert abs(sum(parts) - peak) < 0.3
    assert page.locator("#memory .segment-label").count() >= 1  # numbers on the wide segments of the bar
    # The table shows peak / usable: 80 GiB less the default 5% headroom.
    assert re.search(r"/ 76 GiB", page.locator('#plans tbody tr[data-rank="1"] td').nth(6).inner_text())


def test_bad_input_shows_the_error_by_its_field(page) -> None:  # type: ignore[no-untyped-def]
    _fill(page)
    page.fill("#num_gpus", "2000000")
    page.click("#plan-button")
    error = page.locator('.field-error[data-for="num_gpus"]')
    error.wait_for(state="visible")
    page.wait_for_function("document.querySelector('.field-error[data-for=\"num_gpus\"]').textContent.length > 0")
    assert "num_gpus" in error.inner_text()
    assert "invalid" in (page.locator("#num_gpus").get_attribute("class") or "")
    page.screenshot(path=str(OUTPUT / "page-error.png"), full_page=True)


def test_new_inputs_reach_the_request(page) -> None:  # type: ignore[no-untyped-def]
    _fill(
        page,
        gpus="64",
        batch="64",
        seq_length="4096",
        train_tokens="300B",
        objective="gpu_efficiency",
        top_k="3",
        framework="torchtitan",
        framework_version="0.2.2",
    )
    sent = _submit(page)
    assert sent["framework"] == "torchtitan" and sent["framework_version"] == "0.2.2"
    assert page.locator("#status").inner_text().endswith("for torchtitan (0.2.2)")
    assert sent["model"] == {"preset": "gpt3-175b", "seq_length": 4096}
    assert sent["training"]["train_tokens"] == 300e9
    assert sent["objective"] == "gpu_efficiency"
    assert sent["top_k"] == 3
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    ranks = page.locator("#plans tbody tr").evaluate_all("rows => rows.map(r => r.dataset.rank)")
    assert [r for r in ranks if not r.startswith("baseline")] == ["1", "2", "3"]
    assert "4,096 seq length" in page.locator("#model-shape").inner_text()
    sources = page.locator("#model-sources dl").text_content() or ""
    assert "seq_length" in sources and "request (seq_length)" in sources
    assert "days to train" in page.locator("#plan-facts").inner_text()
    for gpus in page.locator("#plans tbody tr td:nth-child(2)").all_inner_texts():
        assert int(gpus) <= 64  # gpu_efficiency may use fewer


def test_every_precision_is_offered_and_nvfp4_plans_on_blackwell(page) -> None:  # type: ignore[no-untyped-def]
    options = page.locator("#precision option").all_inner_texts()
    assert options == [p.value for p in Precision]
    _fill(page, preset="llama3-70b", profile="gb200-nvl72", gpus="64", batch="256", precision="nvfp4")
    sent = _submit(page)
    assert sent["training"]["precision"] == "nvfp4"
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')


def test_hf_config_takes_a_sequence_length(page) -> None:  # type: ignore[no-untyped-def]
    _fill(page, kind="hf", seq_length="2048", gpus="64", batch="64", top_k="2")
    sent = _submit(page)
    assert sent["model"]["seq_length"] == 2048 and sent["model"]["hf_config"]["model_type"] == "llama"
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    assert page.locator("#model-name").inner_text() == "Hugging Face config (LlamaForCausalLM)"
    assert "2,048 seq length" in page.locator("#model-shape").inner_text()
    _fill(page, kind="hf", seq_length="", gpus="64", batch="64", top_k="2")
    sent = _submit(page)
    assert "seq_length" not in sent["model"]
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    assert "8,192 seq length" in page.locator("#model-shape").inner_text()  # Llama 3's pre-training length
    assert "family pre-training length" in (page.locator("#model-sources dl").text_content() or "")
    page.check('input[name="model-kind"][value="preset"]')


def test_submit_clears_results_and_errors_leave_none(page) -> None:  # type: ignore[no-untyped-def]
    _fill(page, gpus="64", batch="64", top_k="2")
    _submit(page)
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    assert page.locator("#results").is_visible() and page.locator("#model-info").is_visible()

    # While the next answer is on its way, nothing of the last one is on screen.
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    page.route("**/v1/plan", hold)
    page.fill("#top_k", "500")
    page.fill("#model-seq-length", "-4")
    page.click("#plan-button")
    while not held:
        page.wait_for_timeout(20)
    assert page.locator("#status").inner_text() == "planning..."
    for section in ("#results", "#model-info", "#details"):
        assert page.locator(section).is_hidden(), section
    assert page.locator("#plans tbody tr").count() == 0
    held[0].continue_()
    page.unroute("**/v1/plan", hold)

    # The refusal names each field beside it, and only the branch of the model union that was sent.
    page.wait_for_function("document.querySelector('#status').textContent.startsWith('refused')")
    top_k = page.locator('.field-error[data-for="top_k"]')
    assert "less than or equal to 100" in top_k.inner_text()
    seq = page.locator('.field-error[data-for="model-seq-length"]')
    assert seq.inner_text() == "model.seq_length: Input should be greater than or equal to 1"
    assert "invalid" in (page.locator("#top_k").get_attribute("class") or "")
    assert page.locator('.field-error[data-for="form"]').inner_text() == ""
    for section in ("#results", "#model-info", "#details"):
        assert page.locator(section).is_hidden(), section
    page.screenshot(path=str(OUTPUT / "page-refused.png"), full_page=True)

    # Unreadable training tokens are caught before sending.
    _fill(page, gpus="64", batch="64", train_tokens="lots")
    page.click("#plan-button")
    assert "300B" in page.locator('.field-error[data-for="train_tokens"]').inner_text()
    assert page.locator("#results").is_hidden()


def test_nothing_fits_shows_the_least_memory_layout_and_what_to_relax(page) -> None:  # type: ignore[no-untyped-def]
    _fill(page, preset="llama3-405b", profile="dgx-a100-40gb", gpus="64", batch="512")
    _submit(page)
    view = page.locator("#nothing-fits")
    view.wait_for(state="visible")
    assert page.locator("#plans-wrap").is_hidden()  # no empty table
    assert page.locator("#details").is_hidden()
    assert page.locator("#diagnosis").inner_text().startswith("nothing fits")
    # Megatron (the default target) splits query groups, never replicates them: tp <= 8 for 8 KV heads.
    assert (
        page.locator("#least-memory code.layout").inner_text().startswith("tp64 pp1 dp1")
    )  # Megatron-Core >= 0.16 replicates KV heads past 8 groups
    assert re.search(r"needs 109\.0 GiB / 38 GiB capacity", page.locator("#least-memory").inner_text())  # usable
    assert page.locator("#least-memory .gauge-fill.over").count() == 1
    relax = page.locator("#relax li").all_inner_texts()
    assert len(relax) == 1 and re.fullmatch(r"num_gpus: use \d+ GPUs \(a layout fits there\)", relax[0])
    assert page.locator("#model-name").inner_text() == "Llama 3.1 405B"
    page.screenshot(path=str(OUTPUT / "page-nothing-fits.png"), full_page=True)

    _fill(page, preset="llama3-70b", gpus="16", batch="64", tp="1", recompute=("none",))
    _submit(page)
    view.wait_for(state="visible")
    # With tp pinned to 1 and the default 5% headroom, dropping recompute=none alone no longer fits; 32 GPUs do.
    assert page.locator("#relax li").all_inner_texts() == ["num_gpus: use 32 GPUs (a layout fits there)"]


def test_a_badly_factoring_count_shows_the_idle_gpus_and_equivalent_plans(page) -> None:  # type: ignore[no-untyped-def]
    _fill(page, preset="llama3-70b", profile="dgx-h100", gpus="504", batch="1024", top_k="5")
    _submit(page)
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    idle = page.locator("#idle")
    assert idle.is_visible()
    assert re.match(r"\d+ GPUs left idle: 504 GPUs factor badly", idle.inner_text())
    first = page.locator('#plans tbody tr[data-rank="1"] td')
    assert first.nth(0).inner_text() == "1 ≈"  # the first plan is always equivalent to the fastest
    assert re.fullmatch(r"\d{2}\.\d s", first.nth(3).inner_text())  # 3 significant figures
    assert "simplest first" in page.locator("#summary").inner_text()
    _fill(page, preset="llama3-70b", profile="dgx-h100", gpus="512", batch="1024", top_k="5")
    _submit(page)
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    assert page.locator("#idle").is_hidden()


def test_phone_width_has_no_horizontal_overflow(page) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 420, "height": 900})
    try:
        _fill(page)
        width = "document.documentElement.scrollWidth"
        assert page.evaluate(width) <= 420
        right = "Math.max(...[...document.querySelectorAll('#plan-form *')].map(e => e.getBoundingClientRect().right))"
        assert page.evaluate(right) <= 420
        _submit(page)
        page.wait_for_selector("#timeline svg .rank")
        assert page.evaluate(width) <= 420
        assert page.evaluate("document.body.scrollWidth") <= 420
        page.screenshot(path=str(OUTPUT / "page-phone.png"), full_page=True)
        page.fill("#top_k", "500")
        _submit(page)
        assert page.evaluate(width) <= 420  # an error message wraps under its field
    finally:
        page.set_viewport_size({"width": 1280, "height": 1400})


def test_favicon_is_served(page, server: str) -> None:  # type: ignore[no-untyped-def]
    response = page.request.get(server + "/favicon.ico")
    assert response.status == 200
    assert response.headers["content-type"] == "image/x-icon"
    assert response.body()[:4] == b"\x00\x00\x01\x00"  # an ICO header
    assert page.locator('link[rel="icon"]').get_attribute("href") == "/favicon.ico"


def test_shape_form_keeps_its_own_sequence_length(page) -> None:  # type: ignore[no-untyped-def]
    _fill(page, kind="shape", gpus="64", batch="64", top_k="2")
    assert page.locator("#seq-row").is_hidden()
    page.fill("#seq_length", "4096")
    sent = _submit(page)
    assert sent["model"]["seq_length"] == 4096 and sent["model"]["num_layers"] == 32
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    assert page.locator("#model-name").inner_text() == "Model (explicit shape)"
    assert "4,096 seq length" in page.locator("#model-shape").inner_text()
    page.fill("#seq_length", "0")
    _submit(page)
    assert "seq_length" in page.locator('.field-error[data-for="shape"]').inner_text()
    page.fill("#seq_length", "8192")
    page.check('input[name="model-kind"][value="preset"]')


CALIBRATION_RUNS = [  # one 8-GPU node each (dgx-h100): eta and t0 are identified, the network is not
    ({"tp": 1, "pp": 1, "dp": 8, "micro_batch_size": 2}, 64),
    ({"tp": 2, "pp": 1, "dp": 4, "sequence_parallel": True}, 64),
    ({"tp": 8, "pp": 1, "dp": 1, "sequence_parallel": True}, 16),
    ({"tp": 4, "pp": 2, "dp": 1, "sequence_parallel": True}, 32),
]


def test_a_site_calibration_shows_its_constants_and_scatter(page, server: str) -> None:  # type: ignore[no-untyped-def]
    """Four runs measured 15% slower than predicted on dgx-h100, calibrated as dgx-h100@page, then shown."""
    auth = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    shape = {"num_layers": 16, "hidden_size": 1024, "num_attention_heads": 8, "vocab_size": 32000, "seq_length": 2048}
    for layout, batch in CALIBRATION_RUNS:
        run = {
            "model": shape,
            "cluster": {"profile": "dgx-h100", "num_gpus": 8},
            "training": {"global_batch_size": batch},
            "layout": layout,
        }
        predicted = page.request.post(server + "/v1/estimate", data=run).json()["estimate"]["step_time_s"]
        posted = page.request.post(
            server + "/v1/observations", data={**run, "measured": {"step_time_s": 1.15 * predicted}}, headers=auth
        )
        assert posted.status == 201, posted.text()
    made = page.request.post(server + "/v1/hardware-profiles/dgx-h100/calibrate", data={"site": "page"}, headers=auth)
    assert made.status == 201, made.text()

    page.goto(server + "/")
    page.wait_for_selector('#calib-profile option[value="dgx-h100@page"]', state="attached")
    assert page.locator("#calib-profile").input_value() == "dgx-h100@page"  # a site profile is shown first
    page.wait_for_selector("svg.calib-scatter circle.point.after")
    summary = page.locator("#calib-summary").inner_text()
    assert summary.startswith("dgx-h100@page version 1, fitted on 4 observations by page"), summary
    assert "kept at the base's value: network_efficiency" in summary
    assert page.locator("#calib-constants tr[data-constant]").count() == 3
    eta = page.locator('#calib-constants tr[data-constant="gemm_peak_efficiency"] td').nth(2).inner_text()
    assert 0.3 <= float(eta.split()[0]) < 0.65  # 15% slower than the stock eta 0.65 predicts
    assert page.locator("svg.calib-scatter circle.point.before").count() == 4
    assert page.locator("svg.calib-scatter circle.point.after").count() == 4
    assert page.locator("#calib-rows tr").count() == 1 + 4
    # The planning form offers the calibrated profile too.
    assert page.locator('#profile option[value="dgx-h100@page"]').count() == 1
    page.locator("#calibration").screenshot(path=str(OUTPUT / "calibration.png"))

    # A built-in profile: no stored calibration, its observations as predicted on arrival.
    page.select_option("#calib-profile", "dgx-h100")
    page.wait_for_function("document.querySelector('#calib-summary').textContent.startsWith('dgx-h100:')")
    assert "no stored calibration" in page.locator("#calib-summary").inner_text()
    assert "4 observation(s)" in page.locator("#calib-summary").inner_text()
    assert page.locator("svg.calib-scatter circle.point.arrival").count() == 4
    assert page.locator("#calib-constants tr").count() == 0
    page.wait_for_selector('#model-preset option[value="gpt3-175b"]', state="attached")  # the form is ready again
