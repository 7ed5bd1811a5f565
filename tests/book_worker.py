"""``summon worker`` with the tests' stand-in book: what ``summon -c <config> worker`` runs, but built with the
book handed in at the root, as only the tests' own process can (``summon`` has no way to be given one).

Run as ``python -m tests.book_worker <config>``; ``run(config)`` is the same from a forked process. Only the
``told`` marks work across processes: what a test ``say``-s stays in its own."""

from __future__ import annotations

import argparse
import asyncio
import sys

from appservice.__main__ import _config, _serve
from tests.book import BOOK


def run(config: str) -> int:
    asyncio.run(_serve(_config(argparse.Namespace(config=config, verbose=False)), http=False, stand_in=BOOK))
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1]))
