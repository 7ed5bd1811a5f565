from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.core.limits import Breach, Spent, breach

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def ago(**kw: float) -> datetime:
    return NOW - timedelta(**kw)


@pytest.mark.parametrize(
    ("per", "ledger", "reserve", "expected"),
    [
        pytest.param({"day": 1.0}, [], 0.5, None, id="empty-ledger-holds"),
        pytest.param({"day": 1.0}, [Spent(ago(hours=2), 0.5)], 0.5, None, id="exactly-at-the-ceiling-holds"),
        pytest.param({"day": 1.0}, [Spent(ago(hours=2), 0.6)], 0.5,
                     Breach("day", 1.0, 0.6, ago(hours=2) + timedelta(days=1)), id="over-frees-when-oldest-leaves"),
        pytest.param({"day": 1.0}, [Spent(ago(days=2), 5.0)], 0.5, None, id="outside-the-window-does-not-count"),
        pytest.param({"hour": 0.2, "day": 10.0}, [Spent(ago(minutes=30), 0.1)], 0.15,
                     Breach("hour", 0.2, 0.1, ago(minutes=30) + timedelta(hours=1)), id="every-window-must-hold"),
        pytest.param({"day": 1.0, "minute": 0.1}, [Spent(ago(seconds=10), 0.1), Spent(ago(hours=1), 0.1)], 0.05,
                     Breach("minute", 0.1, 0.1, ago(seconds=10) + timedelta(minutes=1)), id="shortest-window-first"),
        pytest.param({"week": 1.0}, [Spent(ago(days=3), 0.4), Spent(ago(days=1), 0.4), Spent(ago(hours=1), 0.2)],
                     0.3, Breach("week", 1.0, 1.0, ago(days=3) + timedelta(weeks=1)),
                     id="frees-after-enough-old-spending-leaves"),
        pytest.param({"day": 0.1}, [], 0.5, Breach("day", 0.1, 0, None), id="one-run-alone-over-never-frees"),
        pytest.param({"month": 3.0}, [Spent(ago(days=29), 2.9)], 0.2,
                     Breach("month", 3.0, 2.9, ago(days=29) + timedelta(days=30)), id="month-is-thirty-days"),
    ],
)
def test_breach(per: dict[str, float], ledger: list[Spent], reserve: float, expected: Breach | None) -> None:
    got = breach(per, ledger, reserve, NOW)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert (got.window, got.limit, got.frees_at) == (expected.window, expected.limit, expected.frees_at)
        assert got.spent == pytest.approx(expected.spent)
