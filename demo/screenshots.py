"""Screenshots of a running operator console for the docs: ``python -m demo.screenshots URL [DIR]``.

Run ``make demo KEEP=1`` first; it prints the console's URL and leaves it
running with the demo's dead letters in place. Uses Debian's Chromium, as the
browser tests do.
"""

from __future__ import annotations

import sys
from pathlib import Path

PAGES = (("/", "console-overview.png"), ("/dlq", "console-dlq.png"))
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(url: str, out: Path) -> None:
    """Save a full-page PNG of the overview and of the DLQ page under ``out``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
        for path, name in PAGES:
            page.goto(url.rstrip("/") + path)
            page.wait_for_selector("h1")
            page.screenshot(path=str(out / name), full_page=True)
            print(out / name)
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2] if len(sys.argv) > 2 else "docs"))
