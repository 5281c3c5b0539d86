"""A real headless Chromium for page tests (the system's, driven by Selenium through the
system's chromedriver), and the checks every page owes a person: every link it shows
answers 200, the browser logged no error, nothing scrolls sideways, screenshots saved."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs the system's chromium and chromium-driver (ci/setup installs them with apt)")
SIZES = {"desktop": (1280, 1000), "phone": (390, 844)}


@contextmanager
def chromium() -> Iterator[Any]:
    pytest.importorskip("selenium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot_dir(tmp_path: Path) -> Path:
    shots = Path(os.environ.get("KERNELHUB_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def check_links(browser: Any, base: str, seen: set[str]) -> int:
    """GET every same-site link on the page shown (each URL once per test); all must be
    200. Returns how many were new."""
    hrefs = browser.execute_script(
        "return Array.from(document.querySelectorAll('a[href]'), a => a.href)")
    new = [h.split("#", 1)[0] for h in hrefs if h.startswith(base)]
    new = [h for h in dict.fromkeys(new) if h not in seen]
    for href in new:
        answer = httpx.get(href, headers={"Accept": "text/html"}, timeout=60)
        assert answer.status_code == 200, f"{browser.current_url} links {href}: " \
                                          f"{answer.status_code} {answer.text[:200]}"
        seen.add(href)
    return len(new)


def console_errors(browser: Any) -> list[dict[str, Any]]:
    return [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def fits_width(browser: Any, width: int) -> bool:
    return int(browser.execute_script("return document.documentElement.scrollWidth")) <= width + 1


def full_page_screenshot(browser: Any, path: Path, width: int, height: int) -> None:
    total = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(width, min(int(total) + 120, 6000))
    browser.save_screenshot(str(path))
    browser.set_window_size(width, height)
