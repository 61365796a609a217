"""A real browser for nnx-viz's figure tests: headless Chromium (Debian's ``chromium`` and
``chromium-driver`` packages, which .ci/run installs) driven by selenium.

Each test module that draws takes the module-scoped ``browser`` fixture (conftest.py: one
Chromium per module, so the tests take seconds); every test using it skips, naming why,
where selenium, Chromium or chromedriver is missing. Helpers load a page from a file,
wait for Plotly to draw it, and read back what the browser drew.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_CHROMIUM = ("chromium", "chromium-browser", "google-chrome")

# Drawn once Plotly has rendered every figure of the page: each plot div carries its
# data and its SVG main layer.
_DRAWN = """
const plots = document.querySelectorAll('.js-plotly-plot');
return plots.length > 0 && Array.from(plots).every(
    p => Array.isArray(p.data) && p.querySelector('.main-svg') !== null);
"""


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the root dev group has it)"
    if not any(shutil.which(name) for name in _CHROMIUM):
        return "no Chromium (apt-get install chromium chromium-driver; .ci/run does)"
    if not shutil.which("chromedriver"):
        return "no chromedriver (apt-get install chromium-driver; .ci/run does)"
    return None


def chromium() -> Iterator[Any]:
    """A headless Chromium, quit when the generator is closed (the fixture's body)."""
    if (why := _missing()) is not None:
        pytest.skip(f"no browser render: {why}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = next(p for name in _CHROMIUM if (p := shutil.which(name)))
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--window-size=1280,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_drawn(browser: Any, page: Path) -> list[dict[str, Any]]:
    """Load ``page`` (``file://``), wait until Plotly has drawn every figure of it, and
    return each figure's ``data`` as the browser holds it (the plot divs' ``.data``)."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page.resolve().as_uri())
    WebDriverWait(browser, 60).until(lambda driver: driver.execute_script(_DRAWN))
    figures: list[dict[str, Any]] = browser.execute_script(
        "return Array.from(document.querySelectorAll('.js-plotly-plot')).map("
        "p => ({id: p.id, data: p.data.map(t => ({name: t.name, x: t.x, y: t.y, "
        "meta: t.meta === undefined ? null : t.meta, type: t.type}))}));")
    return figures


def screenshot_stats(browser: Any) -> tuple[int, float]:
    """(distinct colours, fraction of non-white pixels) of a screenshot of the window."""
    image_module = pytest.importorskip("PIL.Image", reason="pillow decodes the screenshot")
    image = image_module.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")
    counts = image.getcolors(maxcolors=image.width * image.height)  # [(count, rgb), ...]
    white = sum(n for n, rgb in counts if rgb == (255, 255, 255))
    total = image.width * image.height
    return len(counts), (total - white) / total
