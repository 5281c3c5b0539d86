"""The pages in a real headless Chromium (the system's, driven by Selenium through the
system's chromedriver): navigation, the variant matrix, benchmark plots drawn from what
``kernelhub benchmark --publish`` committed through this server's Hub API, no console
errors, and screenshots at phone and desktop sizes saved for review
(``$KERNELHUB_SCREENSHOTS``, else the test's tmp dir; the paths are printed)."""

from __future__ import annotations

from pathlib import Path

from chromium import SIZES, needs_chromium, screenshot_dir
from huggingface_hub import HfApi
from served import WRITE_TOKEN, serving
from showcase import (
    REPO_ID,
    VARIANTS,
    benchmark_and_publish,
    publish_showcase,
    repository_files,
)

pytestmark = needs_chromium



def test_pages_in_a_real_browser(hub: Path, tokens_file: Path, tmp_path: Path,
                                 browser: object) -> None:
    from kernelhub_serve.tokens import TokenTable
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    shots = screenshot_dir(tmp_path)
    publish_showcase(hub, tmp_path)
    with serving(hub, TokenTable.load(tokens_file)) as url:
        HfApi(endpoint=url, token=WRITE_TOKEN).upload_folder(
            folder_path=repository_files(tmp_path), repo_id=REPO_ID, repo_type="kernel",
            revision="v1", commit_message="benchmark classes and an ecosystem run")
        published = benchmark_and_publish(url, WRITE_TOKEN, tmp_path)
        assert published["branch"] == "benchmarks"
        variant = str(published["published"][0]).split("/")[2]  # the build this machine ran
        for size, (width, height) in SIZES.items():
            browser.set_window_size(width, height)
            browser.get(f"{url}/")
            assert browser.title == "Kernels · kernelhub"
            link = browser.find_element(By.LINK_TEXT, REPO_ID)
            browser.save_screenshot(str(shots / f"index-{size}.png"))
            link.click()
            assert browser.current_url == f"{url}/kernels/{REPO_ID}"
            assert browser.find_element(By.TAG_NAME, "h1").text == REPO_ID

            matrix = browser.find_element(By.CSS_SELECTOR, "#matrix table.matrix")
            rows = [r.text for r in matrix.find_elements(By.CSS_SELECTOR, "tbody th")]
            assert rows[:2] == ["2.14", "2.13"] and "any" in rows
            cols = [c.text for c in matrix.find_elements(By.CSS_SELECTOR, "thead th")][1:]
            assert cols[:2] == ["CPU", "CUDA"] and "Apple Metal" in cols
            names = {e.text for e in matrix.find_elements(By.CSS_SELECTOR, "code.vname")}
            assert names == set(VARIANTS)
            assert "x86_64 Linux" in matrix.text and "CUDA 13.x driver" in matrix.text

            signature = browser.find_element(By.ID, "signature").text
            assert "signed" in signature and "SHA256:" in signature and "7 of 7" in signature
            assert "silu_and_mul" in browser.find_element(By.ID, "variants").text

            figures = browser.find_elements(By.CSS_SELECTOR, "#benchmarks figure.plot")
            captions = [f.find_element(By.TAG_NAME, "figcaption").text for f in figures]
            assert len(figures) == 2, captions
            ours, theirs = captions  # the published run, then the ecosystem's payload
            assert ours.startswith(variant) and "PNG as published" in ours, ours
            assert theirs.startswith("AMD EPYC 9654 · cpu · torch 2.13.0"), theirs
            plots = browser.find_elements(By.CSS_SELECTOR, "#benchmarks figure.plot img")
            for img in plots:  # lazy images: scrolled into view, then drawn by the server
                browser.execute_script("arguments[0].scrollIntoView()", img)
                WebDriverWait(browser, 30).until(lambda _, img=img: browser.execute_script(
                    "return arguments[0].complete && arguments[0].naturalWidth > 100", img))
            browser.execute_script("window.scrollTo(0, 0)")
            width_px = browser.execute_script("return document.documentElement.scrollWidth")
            assert width_px <= width + 1, f"the page scrolls sideways on a {size} screen"
            _full_page_screenshot(browser, shots / f"kernel-{size}.png", width)

            browser.find_element(By.LINK_TEXT, "v1.0.0").click()
            assert "rev=v1.0.0" in browser.current_url
            assert "(release," in browser.find_element(By.CLASS_NAME, "lead").text
            browser.find_element(By.LINK_TEXT, "Kernels").click()
            assert browser.current_url == f"{url}/"

        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, errors
    print("screenshots:", *sorted(str(p) for p in shots.glob("*.png")))


def _full_page_screenshot(browser: object, path: Path, width: int) -> None:
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(browser, WebDriver)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(width, min(int(height) + 120, 6000))
    browser.save_screenshot(str(path))
