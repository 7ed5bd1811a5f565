"""The safety nets behind NOTIFY are no longer than the workers' poll: when a LISTEN connection dies without a word
(make chaos, half-open-listen), a mention waits at most that long for a worker and its answer as long again for
the sender — the outbox's net was 60 s, and the answers waited a minute."""

from __future__ import annotations

from engine.run.delivery import IDLE_SECONDS
from engine.run.worker import WorkerSettings
from engine.store.store import LISTEN_CHECK, LISTEN_TIMEOUT


def test_a_delivery_queue_without_notify_looks_as_often_as_a_worker_polls() -> None:
    assert IDLE_SECONDS <= WorkerSettings().poll_seconds


def test_a_silently_dead_listen_connection_is_found_out_within_a_minute() -> None:
    assert LISTEN_CHECK + LISTEN_TIMEOUT <= 60
