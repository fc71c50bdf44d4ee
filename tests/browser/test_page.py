"""The web page in a real browser: Playwright driving Debian's Chromium against the live service.

Skipped only when no Chromium is installed and PLANNER_REQUIRE_BROWSER is unset (.ci/run installs
Chromium and sets it); screenshots go to test-output/.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.localserver import local_service

CHROMIUM = os.environ.get("PLANNER_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
OUTPUT = Path(__file__).resolve().parents[2] / "test-output"
REQUIRED = bool(os.environ.get("PLANNER_REQUIRE_BROWSER"))  # set by .ci/run: CI must not skip these
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED, reason="no Chromium on this machine (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with local_service() as url:
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


def test_plan_gpt3_on_1024_a100s(page) -> None:  # type: ignore[no-untyped-def]
    page.select_option("#model-preset", "gpt3-175b")
    page.select_option("#profile", "dgx-a100-80gb")
    page.fill("#num_gpus", "1024")
    page.fill("#global_batch_size", "1536")
    page.click("#plan-button")
    page.wait_for_selector('#plans tbody tr[data-rank="1"]')
    ranks = page.locator("#plans tbody tr").evaluate_all("rows => rows.map(r => r.dataset.rank)")
    assert ranks[:3] == ["1", "2", "3"] and ranks[-1] == "baseline"
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
    assert "faster than the rule of thumb" in page.locator("#summary").inner_text()
    page.screenshot(path=str(OUTPUT / "page-plan.png"), full_page=True)


def test_bad_input_shows_the_error_by_its_field(page) -> None:  # type: ignore[no-untyped-def]
    page.fill("#num_gpus", "2000000")
    page.click("#plan-button")
    error = page.locator('.field-error[data-for="num_gpus"]')
    error.wait_for(state="visible")
    page.wait_for_function("document.querySelector('.field-error[data-for=\"num_gpus\"]').textContent.length > 0")
    assert "num_gpus" in error.inner_text()
    assert "invalid" in (page.locator("#num_gpus").get_attribute("class") or "")
    page.screenshot(path=str(OUTPUT / "page-error.png"), full_page=True)


def test_favicon_is_served(page, server: str) -> None:  # type: ignore[no-untyped-def]
    response = page.request.get(server + "/favicon.ico")
    assert response.status == 200
    assert response.headers["content-type"] == "image/x-icon"
    assert response.body()[:4] == b"\x00\x00\x01\x00"  # an ICO header
    assert page.locator('link[rel="icon"]').get_attribute("href") == "/favicon.ico"
