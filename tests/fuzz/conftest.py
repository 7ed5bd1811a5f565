"""The fuzz's figures at the end of a run: cases per target, the slowest, and how many were run again."""

from __future__ import annotations

import pytest

from tests.fuzz.budget import CASES, TALLIES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLIES:
        return
    terminalreporter.section(f"fuzz: {CASES} generated cases a target (SUMMON_FUZZ_CASES)")
    for target, tally in sorted(TALLIES.items()):
        came_to = ", ".join(f"{what} {n}" for what, n in tally.outcomes.most_common())
        terminalreporter.write_line(f"{target}: {tally.cases} cases run, slowest {tally.slowest * 1000:.1f} ms, "
                                    f"{tally.rerun} over 100 ms once and run again" + (f"; {came_to}" if came_to else ""))
