"""What a run may use (``Limits``, and the defaults a bot's file may leave out — defined here only), and
per-person ceilings: rolling spend windows, checked before a run exists. Pure.

``limits.per: {minute, hour, day, week, month}`` — every window given must hold. A run reserves its
own ``limits.spend`` when it is summoned (so concurrent summons cannot all squeeze under a ceiling) — the
most it can cost, since no call is made whose worst case does not fit what is left of it
(``engine/providers/worst.py``) — and the reservation is settled to what the run really cost when it ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Limits:
    """What one run may use before it ends: model calls and tool calls, money, wall-clock time."""

    steps: int
    spend: float  # USD
    minutes: float


# What a run may use when its bot's file says nothing (``limits:`` in a bot's file).
DEFAULT_LIMITS = Limits(steps=12, spend=0.50, minutes=10.0)


@dataclass(frozen=True)
class Caps:
    """The deployment's own caps (``limits:`` in summon.yaml): what it may spend in any 24 hours (None: no
    cap), how many runs one person may have waiting or running at once, and how many summonses may wait for
    one bot (for a worker's slot or a provider's permit) before new ones are refused."""

    daily_spend: float | None = None
    live_runs_per_person: int = 3
    waiting_per_bot: int = 100


DEFAULT_CAPS = Caps()

# Runs one worker process works on at once (``worker.slots``). Measured (tests/bench/slots.py, 2 cores, a pool
# of 10, every model call 2 s): 256 slots answer 110 runs/s at a fifth of a core, the engine alone saturates
# near 360 runs/s (~1024 slots), and no slot holds a connection while it waits. 256 keeps a 2-core process busy
# with real model latency (2-30 s) while leaving the cores for the rest of the service (transactions in, the
# outbox out); provider limits, not slots, are what keep a provider's own limits.
DEFAULT_SLOTS = 256

WINDOWS: Mapping[str, timedelta] = {
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
    "month": timedelta(days=30),
}


@dataclass(frozen=True)
class Spent:
    at: datetime
    usd: float


@dataclass(frozen=True)
class Breach:
    window: str
    limit: float
    spent: float
    frees_at: datetime | None  # None: this one run alone is over the ceiling; waiting will not help


def breach(per: Mapping[str, float], ledger: Iterable[Spent], reserve: float, now: datetime) -> Breach | None:
    """The first window (shortest first) that ``reserve`` more would overflow, or None when all hold."""
    entries = sorted(ledger, key=lambda e: e.at)
    for window in sorted(per, key=lambda w: WINDOWS[w]):
        limit = per[window]
        start = now - WINDOWS[window]
        inside = [e for e in entries if e.at > start]
        spent = sum(e.usd for e in inside)
        if spent + reserve <= limit + 1e-12:
            continue
        if reserve > limit:
            return Breach(window, limit, spent, None)
        # Oldest spending leaves the window first: find when enough of it has.
        remaining = spent
        frees_at = None
        for e in inside:
            remaining -= e.usd
            if remaining + reserve <= limit + 1e-12:
                frees_at = e.at + WINDOWS[window]
                break
        return Breach(window, limit, spent, frees_at)
    return None


@dataclass(frozen=True)
class Ceilings:
    """The most a run may use, carried by something that asks on a person's behalf without being them (a
    door grant): it lowers what the bot's file allows and can never raise it. ``per`` holds per-person
    windows as ``limits.per`` does; a window the bot's file does not name is added (it only restricts)."""

    steps: int
    spend: float
    minutes: float
    per: Mapping[str, float]


def lowered(limits: Limits, per: Mapping[str, float], ceilings: Ceilings | None) -> tuple[Limits, dict[str, float]]:
    """What a run may use and the per-person windows that hold for it: the bot's, under ``ceilings``."""
    if ceilings is None:
        return limits, dict(per)
    windows = dict(per)
    for window, usd in ceilings.per.items():
        windows[window] = min(usd, windows.get(window, usd))
    return (Limits(steps=min(limits.steps, ceilings.steps), spend=min(limits.spend, ceilings.spend),
                   minutes=min(limits.minutes, ceilings.minutes)),
            {window: windows[window] for window in WINDOWS if window in windows})
