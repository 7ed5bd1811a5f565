"""How many waiting calls may go to a provider now, and when to look again (``engine/core/permits.py``)."""

from __future__ import annotations

import pytest

from engine.core.permits import LOOK_AGAIN, MARGIN, GateLoad, ProviderLimits, Room, room

IDLE = GateLoad(in_flight=0, requests=0, tokens=0, oldest_age=None, next_expiry=None, paused_for=None)


def load(**kw: object) -> GateLoad:
    return GateLoad(**{**IDLE.__dict__, **kw})  # type: ignore[arg-type]


def test_no_limits_let_everyone_go() -> None:
    assert room(ProviderLimits(), load(in_flight=500, requests=10_000), [100] * 50) == Room(50, 0.0)


def test_calls_in_flight_are_kept_to_the_limit_and_wait_for_a_release_or_the_soonest_lease() -> None:
    limits = ProviderLimits(max_in_flight=3)
    assert room(limits, load(in_flight=1), [10, 10, 10]) == Room(2, LOOK_AGAIN)  # no lease known: look again soon
    assert room(limits, load(in_flight=3, next_expiry=1.5), [10]) == Room(0, 1.5)
    assert room(limits, load(in_flight=3, next_expiry=90.0), [10]) == Room(0, LOOK_AGAIN)


def test_requests_per_minute_are_counted_over_the_window_each_its_share() -> None:
    limits = ProviderLimits(requests_per_minute=40, window_seconds=3)
    assert limits.per_window(40) == 2 and limits.counted_over == 3 + MARGIN
    assert room(limits, load(requests=1, oldest_age=1.0), [1, 1]) == Room(1, pytest.approx(2.5))
    assert ProviderLimits(requests_per_minute=1, window_seconds=10).per_window(1) == 1  # never none at all


def test_tokens_per_minute_count_each_calls_estimate_and_a_call_bigger_than_the_window_goes_alone() -> None:
    limits = ProviderLimits(tokens_per_minute=1000)
    assert room(limits, load(), [400, 400, 400]) == Room(2, LOOK_AGAIN)
    assert room(limits, load(tokens=900, oldest_age=59.0), [200]) == Room(0, pytest.approx(1.5))
    assert room(limits, load(), [5000]).grant == 1  # would never fit: goes when the window is empty
    assert room(limits, load(tokens=1, oldest_age=3.0), [5000]).grant == 0


def test_nobody_overtakes_the_head_of_the_line() -> None:
    limits = ProviderLimits(tokens_per_minute=1000)
    assert room(limits, load(tokens=500, oldest_age=10.0), [600, 10, 10]).grant == 0


def test_a_paused_provider_lets_nobody_go_until_the_pause_ends() -> None:
    assert room(ProviderLimits(), load(paused_for=2.0), [1]) == Room(0, 2.0)
    assert room(ProviderLimits(max_in_flight=5), load(paused_for=30.0), [1]) == Room(0, LOOK_AGAIN)
