"""One headless Chromium (Debian's `chromium` + `chromium-driver`, installed by `make browser`) for the
tests that open a page: the dashboard's and the `simulate --html` report's."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from serve.dashboard import CHART_JS


def start_chromium(window: str) -> Any:
    """A WebDriver on a headless Chromium with a `window` ("W,H") viewport that keeps the browser's
    console log; skips the test where the browser or the vendored Chart.js is missing."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.skip("chromium/chromedriver missing: run `make browser`")
    if not CHART_JS.exists():
        pytest.skip("Chart.js is not vendored: run `make vendor`")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={window}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    return driver
