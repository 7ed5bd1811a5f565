"""A real headless browser for the desk widget's tests: Playwright (from PyPI) driving Debian's Chromium,
installed by ``scripts/chromium`` when missing (Playwright's own browser download cannot work here). Chromium
runs with ``--no-sandbox`` because these machines run the tests as root."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def chromium_path() -> str:
    found = subprocess.run([str(REPO / "scripts" / "chromium")], capture_output=True, text=True, timeout=600)
    if found.returncode != 0:
        raise RuntimeError(found.stderr.strip() or "scripts/chromium failed")
    return found.stdout.strip().splitlines()[-1]


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    path = chromium_path()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            await browser.close()
