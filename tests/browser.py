"""Opening a page in real headless Chromium (Debian's ``chromium``), driven by Playwright.

``open_page`` loads a file:// URL with the network cut off, waits until the report's script
says every plot is drawn, and gives back what a user would have seen: console errors, uncaught
exceptions, requests that left the page, the plots drawn, and a screenshot. ``scripts/test``
installs Chromium where it is missing; without it these tests fail and say so.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class PageVisit:
    """What happened while the page loaded."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    network_requests: list[str] = field(default_factory=list)
    plots: int = 0
    plots_drawn: int = 0
    plots_with_traces: int = 0
    title: str = ""
    text: str = ""


def chromium_path() -> str:
    """Debian's Chromium, which scripts/test installs."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError(
            "Chromium is not installed: run scripts/test, which installs Debian's chromium, "
            "or `apt-get install chromium`"
        )
    return path


def open_page(page_file: Path, screenshot: Path, *, timeout_ms: int = 60_000) -> PageVisit:
    """Load ``page_file`` offline in headless Chromium and take a full-page screenshot."""
    from playwright.sync_api import sync_playwright

    visit = PageVisit()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True
        )
        try:
            context = browser.new_context(offline=True, viewport={"width": 1400, "height": 900})
            page = context.new_page()
            page.on("console", lambda message: _keep_error(message, visit.console_errors))
            page.on("pageerror", lambda error: visit.page_errors.append(str(error)))
            page.on(
                "request",
                lambda request: (
                    not request.url.startswith(("file:", "data:", "blob:"))
                    and visit.network_requests.append(request.url)
                ),
            )
            page.goto(page_file.resolve().as_uri(), wait_until="load", timeout=timeout_ms)
            page.wait_for_function(
                "document.body.dataset.plotsDrawn !== undefined", timeout=timeout_ms
            )
            visit.title = page.title()
            visit.plots = int(page.evaluate("document.body.dataset.plots"))
            visit.plots_drawn = int(page.evaluate("document.body.dataset.plotsDrawn"))
            visit.plots_with_traces = int(
                page.evaluate(
                    "[...document.querySelectorAll('[data-plot]')].filter("
                    "(element) => element.querySelectorAll('.main-svg').length > 0 && "
                    "(element.querySelectorAll('.trace, .hm, .boxlayer path').length > 0 || "
                    "element.querySelectorAll('image').length > 0)).length"
                )
            )
            visit.text = page.inner_text("body")
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return visit


def _keep_error(message: Any, errors: list[str]) -> None:
    if message.type == "error":
        errors.append(message.text)
