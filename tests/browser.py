"""A real browser for the tests: Debian's chromium driven by Playwright for Python.

Playwright's own browser download (`playwright install`) needs the network and is never used:
the tests launch the system's /usr/bin/chromium. Where it (or playwright) is missing they skip,
saying how to install it, except under CI (`.ci/run` sets MGTUTOR_CI=1 and installs both), where
a missing browser is a failure: the browser tests must run there.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"no {CHROMIUM}: apt-get update && apt-get install -y chromium (.ci/run does it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install -e '.[test]' (never `playwright install`)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched browser; skips (fails under CI) when chromium or playwright is missing."""
    why = _missing()
    if why:
        if os.environ.get("MGTUTOR_CI"):
            pytest.fail(f"the browser tests must run in CI: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
