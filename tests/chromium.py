"""Headless Chromium as the browser tests start it: where it is, and the flags that keep it
from reaching the network (this machine's network is closed: without them Chromium retries
its background connections, many at a time) or asking anything of a first run."""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

HEADLESS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
