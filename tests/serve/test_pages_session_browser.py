"""Signing in from a real headless Chromium, by keyboard only: the private repository
appears (marked private) once signed in and is gone after signing out; the search page
finds it only while signed in; every link on every page answers 200; no console errors;
screenshots at phone and desktop sizes saved for review ($KERNELHUB_SCREENSHOTS, else the
test's tmp dir)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
from chromium import SIZES, needs_chromium
from served import READ_TOKEN, serving
from team_hub import PUBLIC, SECRET, publish_team_kernels

pytestmark = needs_chromium


def test_sign_in_see_private_sign_out(hub: Path, tokens_file: Path, tmp_path: Path,
                                      browser: object) -> None:
    from kernelhub_serve.tokens import TokenTable
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    shots = Path(os.environ.get("KERNELHUB_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    with serving(hub, TokenTable.load(tokens_file)) as url:
        publish_team_kernels(hub, tmp_path, url)
        for size, (width, height) in SIZES.items():
            browser.set_window_size(width, height)
            browser.get(f"{url}/")
            assert SECRET not in browser.page_source
            browser.get(f"{url}/kernels/{SECRET}")
            assert browser.find_element(By.TAG_NAME, "h1").text == "404"
            browser.find_element(By.LINK_TEXT, "sign in").click()
            assert browser.title == "Sign in · kernelhub"
            active = browser.switch_to.active_element
            assert active.get_attribute("id") == "token"  # the form starts at the token
            active.send_keys(READ_TOKEN + Keys.ENTER)
            WebDriverWait(browser, 30).until(lambda b: b.current_url == f"{url}/")
            cookie = browser.get_cookie("kernelhub_session")
            assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Lax"
            card = browser.find_element(By.LINK_TEXT, SECRET).find_element(By.XPATH, "..")
            assert "private" in card.find_element(By.CSS_SELECTOR, ".badge.private").text
            assert "signed in as reader" in browser.find_element(By.CSS_SELECTOR,
                                                                 "nav.session").text
            browser.save_screenshot(str(shots / f"index-signed-in-{size}.png"))
            _follow_every_link(browser, url, cookie["value"])

            browser.find_element(By.LINK_TEXT, SECRET).click()
            assert browser.find_element(By.CSS_SELECTOR, "h1 .badge.private").text == "private"
            browser.save_screenshot(str(shots / f"kernel-private-{size}.png"))
            _follow_every_link(browser, url, cookie["value"])

            browser.find_element(By.LINK_TEXT, "Search").click()
            box = browser.find_element(By.ID, "q")
            box.send_keys("secret" + Keys.ENTER)
            WebDriverWait(browser, 30).until(lambda b: "q=secret" in b.current_url)
            results = browser.find_element(By.ID, "results")
            assert [a.text for a in results.find_elements(By.CSS_SELECTOR, "a.repo")] == [SECRET]
            width_px = browser.execute_script("return document.documentElement.scrollWidth")
            assert width_px <= width + 1, f"the search page scrolls sideways on a {size} screen"
            browser.save_screenshot(str(shots / f"search-signed-in-{size}.png"))
            _follow_every_link(browser, url, cookie["value"])

            _press_by_tab(browser, "Sign out")
            WebDriverWait(browser, 30).until(lambda b: b.current_url == f"{url}/")
            assert browser.get_cookie("kernelhub_session") is None
            assert SECRET not in browser.page_source and PUBLIC in browser.page_source
            assert browser.find_element(By.LINK_TEXT, "Sign in")
            browser.get(f"{url}/-/search?q=secret")
            assert browser.find_element(By.ID, "count").text == "0 kernels match"
            browser.get(f"{url}/kernels/{SECRET}")
            assert browser.find_element(By.TAG_NAME, "h1").text == "404"
            browser.get(f"{url}/-/sign-in")
            browser.save_screenshot(str(shots / f"sign-in-{size}.png"))
            _follow_every_link(browser, url, None)
            browser.delete_all_cookies()

        hidden = f"{url}/kernels/{SECRET} - Failed to load resource: the server responded " \
                 "with a status of 404"  # the private page, visited signed out on purpose
        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")
                  and not e["message"].startswith(hidden)]
        assert not errors, errors
    print("screenshots:", *sorted(str(p) for p in shots.glob("*.png")))


def _follow_every_link(driver: object, url: str, session: str | None) -> None:
    """Every link on the page, fetched as this driver would (its session cookie): 200."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(driver, WebDriver)
    here = driver.current_url
    hrefs = {urljoin(here, a.get_attribute("href") or "")
             for a in driver.find_elements(By.CSS_SELECTOR, "a[href]")}
    headers = {"accept": "text/html"}
    if session is not None:
        headers["cookie"] = f"kernelhub_session={session}"
    for href in sorted(hrefs):
        if urlsplit(href).netloc != urlsplit(url).netloc:
            continue
        answer = httpx.get(href, headers=headers)
        assert answer.status_code == 200, (here, href, answer.status_code)


def _press_by_tab(driver: object, label: str) -> None:
    """Reach the control named ``label`` with the Tab key alone, and press Enter on it."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(driver, WebDriver)
    driver.execute_script("document.activeElement && document.activeElement.blur()")
    for _ in range(40):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        if driver.switch_to.active_element.text == label:
            ActionChains(driver).send_keys(Keys.ENTER).perform()
            return
    raise AssertionError(f"{label!r} cannot be reached with the Tab key")
