"""What the engine tells a meter as it works: runs started and finished, claims, steps, fallbacks, spend and
busy slots. The engine only calls these; the composition root hands in a meter that counts (``appservice/
metrics.py``, for /metrics) or none (``NO_METER``), so the engine knows nothing of Prometheus."""

from __future__ import annotations

from typing import Protocol


class Meter(Protocol):
    def run_started(self, bot: str) -> None:
        """A run was claimed for the first time."""

    def run_finished(self, bot: str, ending: str) -> None:
        """A run ended: ``answered``, or its ending (``cancelled``, ``failed``, ``out_of_steps`` …)."""

    def refused(self, reason: str) -> None:
        """A summons was refused (``engine.run.summon.Refusal``)."""

    def claimed(self, seconds: float, waited: float | None) -> None:
        """The claim statement took ``seconds``; the run had waited ``waited`` seconds since it was asked
        (None when it was not its first claim)."""

    def step(self, kind: str, provider: str | None, seconds: float) -> None:
        """A step was recorded, ``seconds`` after the run's previous one (a model call's answer: the call)."""

    def fallback(self, provider: str, reason: str) -> None:
        """``provider`` failed for ``reason`` and the chain moved on to the next."""

    def spent(self, bot: str, usd: float) -> None:
        """A model call was recorded at ``usd``."""

    def slot(self, busy: bool) -> None:
        """A worker slot took a run (True) or let it go (False)."""


class NoMeter:
    """Counts nothing: the engine's default."""

    def run_started(self, bot: str) -> None:
        pass

    def run_finished(self, bot: str, ending: str) -> None:
        pass

    def refused(self, reason: str) -> None:
        pass

    def claimed(self, seconds: float, waited: float | None) -> None:
        pass

    def step(self, kind: str, provider: str | None, seconds: float) -> None:
        pass

    def fallback(self, provider: str, reason: str) -> None:
        pass

    def spent(self, bot: str, usd: float) -> None:
        pass

    def slot(self, busy: bool) -> None:
        pass


NO_METER: Meter = NoMeter()
