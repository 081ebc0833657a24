"""Open the HTML report in headless Chromium (Debian's chromium + chromedriver, selenium).

Checks the verdict text, that every plot image decodes (``naturalWidth > 0``), that the page
loads nothing from the network, and saves a full-page screenshot under
``tmp_path/reports/``. Skips with the reason when the browser, driver or selenium is missing
(install them with ``tests/report/install_browser.sh``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from privaudit.report import build_report
from tests.report import synthetic

pytestmark = pytest.mark.browser

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--window-size=1280,900",
)


def _find(env: str, *names: str) -> str | None:
    """An executable from ``$env`` or the first of ``names`` on PATH / in /usr/bin."""
    if os.environ.get(env):
        return os.environ[env]
    for name in names:
        found = shutil.which(name) or (
            f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None
        )
        if found:
            return found
    return None


def _luminance(css_color: str) -> float:
    """WCAG relative luminance of a CSS ``rgb()``/``rgba()`` colour."""
    channels = [float(x) for x in re.findall(r"[\d.]+", css_color)[:3]]
    assert len(channels) == 3, css_color
    linear = [
        c / 255 / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4
        for c in channels
    ]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(foreground: str, background: str) -> float:
    """WCAG contrast ratio of two CSS colours (1 = invisible, 21 = black on white)."""
    a, b = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (a + 0.05) / (b + 0.05)


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    """A headless Chromium WebDriver with a fresh profile; skips when unavailable."""
    chromium = _find("CHROMIUM", "chromium", "chromium-browser")
    chromedriver = _find("CHROMEDRIVER", "chromedriver")
    if importlib.util.find_spec("selenium") is None:
        pytest.skip("selenium is not installed (run tests/report/install_browser.sh)")
    if chromium is None:
        pytest.skip(
            "chromium is not installed (run tests/report/install_browser.sh: apt-get install chromium)"
        )
    if chromedriver is None:
        pytest.skip(
            "chromedriver is not installed (run tests/report/install_browser.sh: apt-get install chromium-driver)"
        )

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    options.add_argument(f"--user-data-dir={profile}")
    browser = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    browser.set_page_load_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()


def test_report_renders_in_chromium(driver: Any, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    paths = build_report(synthetic.report_inputs(), reports)
    driver.get(paths["html"].resolve().as_uri())

    verdict = driver.execute_script("return document.getElementById('verdict').innerText")
    assert verdict.startswith("FAIL")
    assert "logreg: LTU privacy (attacker model_diff)" in verdict
    assert "dp_sgd" not in verdict  # dp_sgd passes: no reason names it
    # Legible: the verdict text must contrast with its banner (WCAG AA, >= 4.5:1), be big,
    # and be rendered on screen (not hidden, not zero-sized).
    style = driver.execute_script(
        "const v = document.getElementById('verdict'), w = v.querySelector('.word');"
        "const s = getComputedStyle(w), b = getComputedStyle(v), r = w.getBoundingClientRect();"
        "return {color: s.color, background: b.backgroundColor, size: parseFloat(s.fontSize),"
        " width: r.width, height: r.height, visibility: s.visibility, text: w.innerText}"
    )
    assert style["text"] == "FAIL"
    assert contrast(style["color"], style["background"]) >= 4.5, style
    assert style["size"] >= 32 and style["width"] > 0 and style["height"] > 0, style
    assert style["visibility"] == "visible"
    title = driver.execute_script("return document.title")
    assert title.startswith("privaudit")

    images = driver.execute_script(
        "return Array.from(document.images).map(i => "
        "({plot: i.dataset.plot, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight}))"
    )
    assert [i["plot"] for i in images] == [
        "privacy_utility",
        "epsilon_vs_trials",
        "tradeoff",
        "privacy_scores",
        "roc",
    ]
    for image in images:
        assert image["complete"] and image["w"] > 0 and image["h"] > 0, image

    # Nothing was fetched except the page itself (plots are data URIs, no CSS/JS/fonts).
    resources = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => !n.startsWith('data:'))"
    )
    assert resources == []

    # Issue 34: at a common laptop width nothing overflows the page sideways (wide tables scroll in their box)
    driver.set_window_size(1400, 900)
    overflow = driver.execute_script(
        "const d = document.documentElement; return {scroll: d.scrollWidth, client: d.clientWidth}")
    assert overflow["scroll"] <= overflow["client"], overflow

    # Issue 44: at 1400 px the trade-off plot is shown unscaled, so its legend (LEGEND_PT at 100 dpi) is >= 10 px
    from privaudit.report.figures import LEGEND_PT

    shown = driver.execute_script(
        "const i = document.querySelector('img[data-plot=tradeoff]');"
        "return {client: i.getBoundingClientRect().width, natural: i.naturalWidth}")
    assert LEGEND_PT * 100 / 72 * shown["client"] / shown["natural"] >= 10, shown

    # Full-page screenshot: grow the window to the document height, then capture.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(int(height) + 100, 16000))
    shot = reports / "audit_screenshot.png"
    assert driver.save_screenshot(str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and shot.stat().st_size > 50_000
    keep = os.environ.get("PRIVAUDIT_SCREENSHOT_DIR")
    if keep:  # optional: keep a copy outside pytest's temp dir for review
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy2(shot, Path(keep) / shot.name)


def test_a_pass_without_a_claim_looks_different_from_a_certified_pass(driver: Any, tmp_path: Path) -> None:
    """Issue 44: "PASS, no DP claim" is a visibly different banner from a certified PASS."""
    from tests.report.test_first_screen import certified_and_no_claim, inputs_of, no_claim_only

    looks = {}
    for name, m in (("certified", certified_and_no_claim()), ("no_claim", no_claim_only())):
        paths = build_report(inputs_of(m, min_privacy=0.0), tmp_path / name)
        driver.get(paths["html"].resolve().as_uri())
        looks[name] = driver.execute_script(
            "const v = document.getElementById('verdict'), w = v.querySelector('.word'), b = getComputedStyle(v);"
            "return {background: b.backgroundColor, border: b.borderTopStyle, word: w.innerText,"
            " color: getComputedStyle(w).color, text: v.innerText}")
    certified, no_claim = looks["certified"], looks["no_claim"]
    assert certified["word"] == no_claim["word"] == "PASS"
    assert certified["background"] != no_claim["background"] and no_claim["border"] == "dashed"
    assert contrast(no_claim["color"], no_claim["background"]) >= 4.5, no_claim
    assert "no DP claim" in no_claim["text"] and "strongest ε̂ 0.958" in certified["text"]
