"""A provider's limits, and how many of the calls waiting for it may go now. Pure: the counts are read under
the provider's row lock (``engine/store/providers.py``) and handed in; a verdict comes out.

Every worker on every machine keeps one provider's limits together, through PostgreSQL: a model call takes a
*permit* (a row), leased for as long as the call may take, and hands it back when the call returns. The rows
say everything the limits need — calls in flight (granted, not handed back, lease not run out), requests and
tokens in the last window (granted within it), and who is waiting, in order (asked, not yet granted). A
worker that dies holding a permit holds it only until its lease runs out.

Requests and tokens per minute are counted over ``window_seconds`` (60 by default), each allowed its share
of the minute: a provider that enforces its per-minute limits over shorter periods is kept by a shorter
window. A little more than the window is counted (``MARGIN``), so a request that took a moment longer to
reach the provider is never counted by it in a window we did not grant it in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MARGIN = 0.5  # seconds added to the window the requests and tokens are counted over
# However long a verdict says to wait, a waiter looks again at least this often (a release NOTIFYs sooner).
LOOK_AGAIN = 5.0


@dataclass(frozen=True)
class ProviderLimits:
    """What one provider allows (``SUMMON_PROVIDER_<NAME>_MAX_IN_FLIGHT``, ``_RPM``, ``_TPM``, ``_WINDOW``);
    None: no limit of that kind."""

    max_in_flight: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    window_seconds: float = 60.0
    call_seconds: float = 120.0  # the longest one call to it may take (its TIMEOUT): what a permit is leased for

    @property
    def limited(self) -> bool:
        return any(x is not None for x in (self.max_in_flight, self.requests_per_minute, self.tokens_per_minute))

    @property
    def counted_over(self) -> float:
        """Seconds the requests and tokens are counted over."""
        return self.window_seconds + MARGIN

    def per_window(self, per_minute: int) -> int:
        """A per-minute limit's share of one window (at least one)."""
        return max(1, math.floor(per_minute * self.window_seconds / 60.0))


NO_LIMITS = ProviderLimits()


@dataclass(frozen=True)
class GateLoad:
    """A provider's permits as its rows stand (read under its lock). Ages and times in seconds."""

    in_flight: int
    requests: int  # granted within the window
    tokens: int  # granted within the window
    oldest_age: float | None  # since the oldest grant still in the window
    next_expiry: float | None  # until the soonest in-flight lease runs out
    paused_for: float | None  # until the provider's pause (a 429 with retry-after) ends


@dataclass(frozen=True)
class Room:
    """How many of the waiting calls (head first) may go now, and when to look again when not all may."""

    grant: int
    wait: float


def room(limits: ProviderLimits, load: GateLoad, waiting: Sequence[int]) -> Room:
    """``waiting``: each waiting call's tokens (its estimate), in the order they asked. The head goes first:
    a call that does not fit stops the ones behind it (nobody overtakes)."""
    if load.paused_for is not None and load.paused_for > 0:
        return Room(0, min(load.paused_for, LOOK_AGAIN))
    in_flight, requests, tokens = load.in_flight, load.requests, load.tokens
    until_oldest_leaves = (max(0.01, limits.counted_over - load.oldest_age) if load.oldest_age is not None
                           else LOOK_AGAIN)
    granted = 0
    wait = 0.0
    for want in waiting:
        if limits.max_in_flight is not None and in_flight >= limits.max_in_flight:
            # A call handed back NOTIFYs; the soonest lease to run out is the latest it can take.
            wait = load.next_expiry if load.next_expiry is not None else LOOK_AGAIN
            break
        if limits.requests_per_minute is not None and requests >= limits.per_window(limits.requests_per_minute):
            wait = until_oldest_leaves
            break
        if limits.tokens_per_minute is not None and tokens > 0 \
                and tokens + want > limits.per_window(limits.tokens_per_minute):
            # A call bigger than the whole allowance goes alone, once the window is empty.
            wait = until_oldest_leaves
            break
        granted += 1
        in_flight += 1
        requests += 1
        tokens += want
    if granted == len(waiting):
        return Room(granted, 0.0)
    return Room(granted, min(max(wait, 0.01), LOOK_AGAIN))
