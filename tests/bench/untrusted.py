"""Worst-case reading times of untrusted text (issue 12, item 1): the issue's inputs and the worst case of
each HTML construct, as ingest reads a line (64 KiB) and as ``fetch`` reads a page (at its parse cap).
Prints figures; asserts nothing. ``python -m tests.bench.untrusted``"""

from __future__ import annotations

import time
from collections.abc import Callable

from appservice.matrix.inbound.mentions import Puppet, named_bots
from appservice.matrix.inbound.said import read_event
from engine.tools.fenced import html_to_text as page_text
from engine.tools.fetch import FetchSettings
from tests.untrusted import ISSUE_INPUTS, KIB, constructs, message

PUPPETS = [Puppet("@bot_helper:localhost", "Helper")]


def best_of(times: int, read: Callable[[], object]) -> float:
    """The fastest of ``times`` runs, in ms (the least disturbed by whatever else the machine does)."""
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        read()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def as_ingest_reads(html: str) -> None:
    line = read_event(message("fallback", html))
    if line is not None:
        named_bots(line, PUPPETS)


def main() -> None:
    page_cap = FetchSettings().max_html_chars
    print(f"{'input':34s} {'chars':>8s} {'a line (ms)':>12s} {'a page (ms)':>12s}")
    for name, html in ISSUE_INPUTS:
        print(f"{name:34s} {len(html):8d} {best_of(3, lambda: as_ingest_reads(html)):12.2f} "  # noqa: B023
              f"{best_of(3, lambda: page_text(html)):12.2f}")  # noqa: B023
    pages = dict(constructs(page_cap))
    for name, html in constructs(64 * KIB):
        page = pages[name]
        print(f"{name:34s} {len(html):8d} {best_of(3, lambda: as_ingest_reads(html)):12.2f} "  # noqa: B023
              f"{best_of(3, lambda: page_text(page)):12.2f}  (page: {len(page) // KIB} Ki chars)")  # noqa: B023


if __name__ == "__main__":
    main()
