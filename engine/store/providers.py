"""Provider limits shared by every worker: permits to call a provider, leased, counted under the provider's row
lock (``sql/queries/providers.sql``; the rules are ``engine/core/permits.py``, the waiting ``engine/providers/
limits.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.core.permits import GateLoad
from engine.store.base import Family, rows


@dataclass(frozen=True, slots=True)
class Waiting:
    """A call waiting for a provider: its permit, whose it is, and the tokens it will count for."""

    id: int
    worker: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Locked:
    """A provider's row, taken for the rest of the transaction: how long its pause still runs (None: not
    paused)."""

    paused_for: float | None


@dataclass(frozen=True, slots=True)
class ProviderState:
    """One provider as every worker together uses it (``summon status``, ``/metrics``): calls in flight, calls
    waiting for a permit (and the oldest's wait, seconds), requests and tokens granted in the last minute, and
    its pause (seconds still to run and the provider's sentence; None: not paused). Only providers kept to
    limits take permits; a provider without limits shows only its pauses."""

    provider: str
    in_flight: int
    waiting: int
    oldest_waiting: float | None
    requests_last_minute: int
    tokens_last_minute: int
    paused_for: float | None
    paused_reason: str | None


class Providers(Family):
    __slots__ = ()

    async def lock(self, gate: str) -> Locked:
        """Take provider ``gate``'s row (made the first time) for the rest of the transaction."""
        record = await self._one("lock_provider_gate", gate)
        if record is None:
            await self._run("add_provider_gate", gate)
            record = await self._one("lock_provider_gate", gate)
        return Locked(record["paused_for"])

    async def load(self, gate: str, counted_over: float) -> GateLoad:
        """Its permits as they stand, the requests and tokens counted over the last ``counted_over`` seconds."""
        r = await self._one("provider_gate_load", gate, counted_over)
        return GateLoad(in_flight=int(r["in_flight"]), requests=int(r["requests"]), tokens=int(r["tokens"]),
                        oldest_age=r["oldest_age"], next_expiry=r["next_expiry"], paused_for=None)

    async def waiting(self, gate: str, limit: int) -> list[Waiting]:
        """The calls waiting for it, in the order they asked (whose askers still look)."""
        return rows(Waiting, await self._all("provider_waiting", gate, limit))

    async def ask(self, gate: str, worker: str, run_id: int | None, tokens: int, *, lease_seconds: float,
                  granted: bool, look_within: float) -> int:
        """A permit, granted now (leased ``lease_seconds``) or waiting (its asker looks again within
        ``look_within`` seconds, or it drops out of line); its id."""
        return int(await self._value("insert_provider_permit", gate, worker, run_id, tokens, lease_seconds,
                                     granted, look_within))

    async def grant(self, ids: Sequence[int]) -> list[int]:
        """Grant these waiting permits; the ids granted."""
        return [int(r["id"]) for r in await self._all("grant_provider_permits", list(ids))]

    async def keep_waiting(self, ids: Sequence[int], look_within: float) -> None:
        await self._run("keep_provider_permits_waiting", list(ids), look_within)

    async def release(self, permit: int, tokens: int | None) -> None:
        """The call returned: hand the permit back (with the tokens it used) and wake whoever waits."""
        await self._run("release_provider_permit", permit, tokens)

    async def withdraw(self, permit: int) -> bool:
        """A waiting permit nobody wants any more; False when it was granted meanwhile (it is the asker's)."""
        return await self._value("withdraw_provider_permit", permit) is not None

    async def wake(self, gate: str) -> None:
        """Wake every worker waiting for ``gate``."""
        await self._run("wake_provider_waiters", gate)

    async def prune(self, keep_seconds: float) -> int:
        """Forget permits no window counts any more; how many."""
        return await self._run("prune_provider_permits", keep_seconds)

    async def pause(self, gate: str, seconds: float, reason: str) -> None:
        """No call to ``gate`` from any worker for ``seconds`` (a longer pause already recorded stands)."""
        await self._run("pause_provider", gate, seconds, reason)

    async def paused_for(self, gate: str) -> float | None:
        """How long ``gate``'s pause still runs (None: not paused)."""
        seconds = await self._value("provider_paused_for", gate)
        return None if seconds is None else float(seconds)

    async def status(self) -> list[ProviderState]:
        """Every provider anybody asked a permit of (or paused), as every worker together uses it."""
        return rows(ProviderState, await self._all("provider_gates_status"))

    async def forget(self, worker: str) -> None:
        """``worker`` stops: its calls are handed back, and it waits for nothing."""
        await self._run("forget_provider_permits", worker)
