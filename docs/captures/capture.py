"""Make the captures of docs/captures/: a run's terminal output at 80 columns and the top of
its report.html in headless Chromium (Debian's chromium and chromium-driver, as
tests/unit/test_report_browser.py uses them).

Usage, after a run made with ``COLUMNS=80 kafka-chaos run ... --out DIR > LOG 2>&1``:

    python docs/captures/capture.py NAME DIR LOG

writes ``docs/captures/NAME.txt`` (the log, its run directory written as ``runs/...``) and
``docs/captures/NAME.png`` (1280 x 1400 px of ``DIR/latest/report.html``, its plots drawn).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WIDTH_PX, HEIGHT_PX = 1280, 1400


def terminal(name: str, out: Path, log: Path) -> Path:
    """The run's terminal output, as a reader of the docs should see it: the temporary
    directory it ran in shown as ``runs``. Returns the capture's path."""
    text = log.read_text().replace(str(out), "runs")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # a terminal's colours, if any were kept
    path = HERE / f"{name}.txt"
    path.write_text(text)
    return path


def screenshot(name: str, out: Path) -> Path:
    """The top of the run's ``report.html`` once every plot is drawn. Returns its path."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                f"--window-size={WIDTH_PX},{HEIGHT_PX}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get((out / "latest" / "report.html").resolve().as_uri())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            divs = driver.find_elements(By.CSS_SELECTOR, "div[id^='fig-']")
            drawn = driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")
            if divs and len(drawn) >= len(divs):
                break
            time.sleep(0.2)
        path = HERE / f"{name}.png"
        driver.save_screenshot(str(path))
        return path
    finally:
        driver.quit()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    name, out, log = sys.argv[1], Path(sys.argv[2]).resolve(), Path(sys.argv[3])
    for made in (terminal(name, out, log), screenshot(name, out)):
        print(f"{made} ({made.stat().st_size:,} bytes)")
