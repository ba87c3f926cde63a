"""``report.html`` in a real browser: Debian's headless Chromium driven by Selenium.

The report of the stored fixture run (``tests/fixtures/report_run``: kill, pause and partition
windows, monitor samples, planted lost writes) is opened from ``file://`` with no network;
every plot must be drawn, no script error logged. A full-page screenshot is saved to
``/tmp/report.png`` for a person to look at. Chromium and chromedriver come from ``setup.sh``
(Debian's ``chromium`` and ``chromium-driver``); Selenium Manager downloads nothing, since
both paths are given.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kafka_chaos.report import html as html_report

pytestmark = pytest.mark.browser

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_run"
SCREENSHOT = Path("/tmp/report.png")


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            pytest.fail(f"{path} is missing: run ./setup.sh (apt-get install {package})")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def test_the_report_renders_every_plot_without_errors(browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run_dir = Path(shutil.copytree(FIXTURE, tmp_path / "run"))
    results = json.loads((run_dir / "results.json").read_text())
    page = html_report.write(run_dir)
    browser.get(page.resolve().as_uri())
    divs = browser.find_elements(By.CSS_SELECTOR, "div[id^='fig-']")
    assert len(divs) == 3 + len(html_report.example_windows(results["anomalies"]))

    def drawn(driver) -> bool:
        plots = driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
        return len(plots) == len(divs) and all(
            p.find_elements(By.CSS_SELECTOR, "svg.main-svg") for p in plots)
    WebDriverWait(browser, 30).until(drawn)
    # each plot holds its traces: the timeline's grid image, lines and markers elsewhere
    for div in divs:
        traces = div.find_elements(By.CSS_SELECTOR, "g.trace, g.hm, image")
        assert traces, div.get_attribute("id")

    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    banner = browser.find_element(By.ID, "verdict").text
    assert banner.startswith("VIOLATIONS:")
    for name in results["violations"]:
        assert f"{name} ({results['anomalies'][name]['count']})" in banner
    assert f"exit code 1 under --fail-on {results['fail_on']}" in banner
    # availability as time beside the share of sends: the seconds and share with no ack
    avail = browser.find_element(By.XPATH, "//th[starts-with(., 'windows without an ack')]"
                                 "/following-sibling::td").text
    assert " s in all" in avail and "% of the workload's" in avail, avail
    assert "without an acknowledgement" in avail
    # what a person reads carries no Python repr and no Markdown backtick (the scripts and
    # the raw ops' JSON cells aside)
    text = browser.find_element(By.TAG_NAME, "body").text
    assert "{'" not in text and "`" not in text, [
        line for line in text.splitlines() if "{'" in line or "`" in line][:3]
    # the final reads have a row of their own, after the workers'
    ticks = browser.execute_script(
        "return document.querySelector(\"div[id^='fig-timeline']\").layout.yaxis.ticktext")
    assert ticks[-1] == "final reads" and ticks[:2] == ["monitor", "nemesis"], ticks
    assert all(t.startswith("w") for t in ticks[2:-1]), ticks

    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(height + 40, 16000))
    # plotly relayouts responsive plots on resize: wait until each is drawn at its new width
    WebDriverWait(browser, 20).until(lambda b: b.execute_script(
        "return [...document.querySelectorAll('.js-plotly-plot')].every(d => Math.abs("
        "d.querySelector('.main-svg').getAttribute('width') - d.clientWidth) < 2)"))
    assert browser.save_screenshot(str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 50_000


def test_the_comparison_page_renders_and_links_each_runs_report(browser, tmp_path) -> None:
    """``compare.html`` of a stored comparison (``tests/compare_builder.py``): three plots
    drawn, a verdict tag per repeat, and the violating repeat's link opens its report."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from kafka_chaos.compare import outputs
    from tests import compare_builder

    comparison = compare_builder.build(tmp_path)
    page = outputs.write_all(comparison)["compare.html"]
    browser.get(page.resolve().as_uri())

    def drawn(driver) -> bool:
        plots = driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
        return len(plots) == 3 and all(p.find_elements(By.CSS_SELECTOR, "g.trace.bars")
                                       for p in plots)
    WebDriverWait(browser, 30).until(drawn)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    rows = browser.find_elements(By.CSS_SELECTOR, "#cells tr")
    assert len(rows) == 1 + len(comparison.cells)
    tags = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#cells .tag")]
    assert tags == ["violation (3)", "permitted (4)", "error (3)", "pending (4)",
                    "pending (3)", "pending (4)"]
    browser.save_screenshot("/tmp/compare.png")
    browser.find_element(By.CSS_SELECTOR, "#cells a.tag.violation").click()
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.ID, "verdict"))
    assert browser.find_element(By.ID, "verdict").text.startswith("VIOLATIONS:")
