"""Reading a repository in a real headless Chromium, as a person does: the README on the
kernel's page (and a hostile one that runs nothing), the file browser down to a variant's
file, the history and a commit, two releases compared — every link on every page answers
200, no console errors, nothing scrolls sideways on a phone, reachable by keyboard alone,
screenshots at phone and desktop sizes saved (``$KERNELHUB_SCREENSHOTS``, else the test's
tmp dir; the paths are printed)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from chromium import (
    SIZES,
    check_links,
    chromium,
    console_errors,
    fits_width,
    full_page_screenshot,
    needs_chromium,
    screenshot_dir,
)
from huggingface_hub import HfApi
from repo_story import CPU, CUDA, REPO_ID, UNIVERSAL, publish_story
from served import WRITE_TOKEN
from test_repo_pages import HOSTILE_README

pytestmark = needs_chromium
K = f"/kernels/{REPO_ID}"


def test_reading_a_repository_in_a_real_browser(server: str, hub: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    story = publish_story(hub, tmp_path, server)
    shots = screenshot_dir(tmp_path)
    seen: set[str] = set()
    with chromium() as browser:
        for size, (width, height) in SIZES.items():
            browser.set_window_size(width, height)

            def visit(name: str, size: str = size, width: int = width, height: int = height
                      ) -> None:
                """The checks every page owes, on the page shown."""
                assert fits_width(browser, width), f"{name} scrolls sideways on a {size} screen"
                check_links(browser, server, seen)
                full_page_screenshot(browser, shots / f"repo-{name}-{size}.png", width, height)

            browser.get(f"{server}{K}")
            readme = browser.find_element(By.ID, "readme")
            assert readme.find_element(By.TAG_NAME, "h1").text == "Demo kernel"
            assert readme.find_element(By.CSS_SELECTOR, "table td").text == "silu"
            visit("kernel")

            _navigate(browser, lambda: _keyboard_to(browser, "Files"))  # Tab, Enter: no mouse
            assert browser.current_url == f"{server}{K}/tree/v1"
            names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#files td:first-child a")]
            assert names[:3] == ["build/", "data/", "docs/"] and "README.md" in names
            visit("files")
            _navigate(browser, lambda: browser.find_element(By.LINK_TEXT, "build/").click())
            _navigate(browser, lambda: browser.find_element(By.LINK_TEXT, f"{CPU}/").click())
            row = browser.find_element(By.XPATH, "//tr[td/a[text()='__init__.py']]")
            assert hashlib.sha256(b"VALUE = 2\n").hexdigest() in row.text
            visit("variant")
            _navigate(browser, lambda: browser.find_element(By.LINK_TEXT, "__init__.py").click())
            assert browser.find_element(By.ID, "source").text == "VALUE = 2"
            facts = browser.find_element(By.ID, "file").text
            assert "matches metadata.json" in facts
            download = browser.find_element(By.PARTIAL_LINK_TEXT, "__init__.py")
            href = download.get_attribute("href")
            assert story["v1.1.0"] in href and httpx.get(href).content == b"VALUE = 2\n"
            visit("file")

            _navigate(browser, lambda: _keyboard_to(browser, "History"))
            assert browser.current_url == f"{server}{K}/commits/v1"
            entries = browser.find_elements(By.CSS_SELECTOR, "#commits li a")
            assert [e.text for e in entries] == ["release 1.1.0", "Docs and odd files",
                                                 "release 1.0.0"]
            visit("history")
            _navigate(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#commits li a")[1]
                      .click())
            assert browser.current_url == f"{server}{K}/commit/{story['docs']}"
            assert story["docs"] in browser.find_element(By.ID, "commit").text
            changed = browser.find_element(By.ID, "changes").text
            assert "docs/page.html" in changed and "README.md" in changed
            visit("commit")

            _navigate(browser, lambda: _keyboard_to(browser, "Compare"))
            assert browser.find_element(By.NAME, "base").get_attribute("value") == "v1.0.0"
            _navigate(browser, lambda: browser.find_element(By.CSS_SELECTOR, "form.compare button").click())
            assert "base=v1.0.0&head=v1.1.0" in browser.current_url
            variants = browser.find_element(By.ID, "variant-changes").text
            for name, status in ((CPU, "changed"), (UNIVERSAL, "removed"), (CUDA, "added")):
                assert f"{name} {status}" in variants, variants
            visit("compare")

        errors = console_errors(browser)
        assert not errors, errors

        HfApi(endpoint=server, token=WRITE_TOKEN).upload_file(
            path_or_fileobj=HOSTILE_README.encode(), path_in_repo="README.md",
            repo_id=REPO_ID, repo_type="kernel", revision="v1")
        browser.get(f"{server}{K}")
        assert browser.find_element(By.ID, "readme").find_element(By.TAG_NAME, "h1").text == "Title"
        assert browser.execute_script("return typeof window.pwned") == "undefined"
        assert browser.execute_script("return document.querySelectorAll("
                                      "'#readme script, #readme iframe, #readme form').length") == 0
        hrefs = browser.execute_script("return Array.from(document.querySelectorAll("
                                       "'#readme [href], #readme [src]'), e => e.href || e.src)")
        assert all(h.startswith((server, "https://")) for h in hrefs), hrefs
        assert browser.title == f"{REPO_ID} · kernelhub"
        browser.save_screenshot(str(shots / "repo-hostile-readme-desktop.png"))
    print(f"{len(seen)} links followed; screenshots:",
          *sorted(str(p) for p in shots.glob("repo-*.png")))


def _navigate(browser: Any, action: Callable[[], object]) -> None:
    """Do what leaves the page, then wait until the next page has replaced it (a click
    returns before a loaded machine has finished navigating)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old = browser.find_element("tag name", "html")
    for attempt in range(3):
        try:
            action()  # finds its element now: a page still settling can drop a node found earlier
            break
        except (StaleElementReferenceException, WebDriverException) as e:
            if attempt == 2 or (not isinstance(e, StaleElementReferenceException) and \
                    "does not belong to the document" not in str(e)):
                raise
            WebDriverWait(browser, 60).until(
                lambda b: b.execute_script("return document.readyState") == "complete")
            old = browser.find_element("tag name", "html")
    WebDriverWait(browser, 60).until(expected_conditions.staleness_of(old))
    WebDriverWait(browser, 60).until(
        lambda b: b.execute_script("return document.readyState") == "complete")


def _keyboard_to(browser: Any, text: str) -> None:
    """Tab from the top of the page to the link named ``text`` and press Enter."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.execute_script("document.activeElement && document.activeElement.blur();"
                           "window.scrollTo(0, 0)")
    browser.find_element("tag name", "body").click()
    for _ in range(40):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        if browser.execute_script("return document.activeElement.textContent") == text:
            ActionChains(browser).send_keys(Keys.ENTER).perform()
            return
    raise AssertionError(f"{text!r} cannot be reached with Tab on {browser.current_url}")
