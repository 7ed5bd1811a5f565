"""Provider limits kept by every worker on every machine together, through PostgreSQL (SPEC §2).

A model call to a provider with limits first takes a *permit*: a row in ``provider_permits``, taken under the
provider's row lock (so each taker counts what the one before it wrote), leased for as long as the call may
take, and handed back when it returns. Why a leased-permit table, and not advisory locks or a token-bucket row:

- A call holds no database connection while it waits for the model (slots are cheap only so): an advisory
  lock is held by a session, so every call in flight would pin a connection for its whole 2-30 s.
- A worker that dies holding a permit holds it only until its lease runs out (the call's own time limit and a
  margin); then the call in flight is counted no more, and the next waiting call goes.
- The same rows count calls in flight, requests and tokens in the last minute (a sliding window, never more
  than the limit in any minute — a bucket refilled by the second lets twice its size through in one), and who
  waits in what order (nobody overtakes; "3 questions ahead" is read off them).

A provider that answers 429 (or 503, 529) with ``retry-after`` is paused for every worker until then, recorded
on its row (before the failed call's permit is handed back, so no waiting call slips through meanwhile): a
call that can go to another provider meanwhile does; one that cannot waits the pause out, if it may wait that
long. A pause is capped at ``LONGEST_PAUSE``.

Waiting: a call that cannot go at once leaves a waiting permit in line. One task per provider in this process
(not one per waiting call) looks at the line when a permit is handed back anywhere (``NOTIFY summon_permits``)
or when the verdict says room will be made (a minute's oldest request leaving it), grants this process's
calls among those at the head that may go now, and wakes the other processes when the head is theirs. A
waiting call keeps its place while its process looks after it; a dead process's waiting calls drop out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from engine.clock import Clock
from engine.core.permits import NO_LIMITS, ProviderLimits, room
from engine.errors import StoreError
from engine.store import Store
from engine.tasks import TaskGroup

log = logging.getLogger(__name__)

# A waiting call drops out of line unless its process looks after it this often (it does, every few seconds).
LOOK_WITHIN = 20.0
# A granted permit's lease: the call's own time limit, and this.
LEASE_MARGIN = 5.0
# How many waiting calls one look considers (the rest wait their turn behind them anyway).
LINE_LOOK = 500
PRUNE_EVERY = 30.0
# A handed-back permit is kept this long past its window (for ``summon status``: the last minute's calls).
KEEP_PAST_WINDOW = 60.0
# The longest a provider's retry-after pauses it for (one asking for a day is asked again within the hour).
LONGEST_PAUSE = 3600.0


@dataclass(frozen=True)
class Permit:
    """Leave to make one call to ``provider``; ``id`` None: it keeps no limits here (nothing was recorded)."""

    provider: str
    id: int | None


@dataclass(frozen=True)
class NoPermit:
    """No leave to call ``provider``: ``busy`` — its limits kept the call waiting ``seconds`` and it could
    wait no longer; ``paused`` — the provider asked everyone to wait ``seconds`` more (a 429 with retry-after)."""

    provider: str
    reason: Literal["busy", "paused"]
    seconds: float


@dataclass
class _Line:
    """This process's calls waiting for one provider: permit id → the event that says it was granted."""

    waiting: dict[int, asyncio.Event] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    looking: asyncio.Task[None] | None = None


class Limiter:
    def __init__(self, store: Store, clock: Clock, worker_id: str, limits: Mapping[str, ProviderLimits]) -> None:
        self.store = store
        self.clock = clock
        self.worker_id = worker_id
        self.limits = dict(limits)
        self._lines: dict[str, _Line] = {}
        self._tasks = TaskGroup("provider-limits")

    def limits_of(self, provider: str) -> ProviderLimits:
        return self.limits.get(provider, NO_LIMITS)

    # --- the long-running part ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Hear permits handed back anywhere (NOTIFY), and forget old ones, until ``stop``; then hand back
        whatever this process still holds."""
        try:
            async with TaskGroup("provider-limits-run") as group:
                group.spawn(self.store.listen("summon_permits", self._heard, stop), name="permits-listen")
                group.spawn(self._pruner(stop), name="permits-prune")
                await stop.wait()
        finally:
            await self._tasks.close()
            try:
                await self.store.providers.forget(self.worker_id)
            except StoreError:
                log.warning("could not hand back this worker's provider permits; their leases will run out")

    def _heard(self) -> None:
        for line in self._lines.values():
            line.wake.set()

    async def _pruner(self, stop: asyncio.Event) -> None:
        keep = max([lim.counted_over for lim in self.limits.values()] + [60.0]) + KEEP_PAST_WINDOW
        while not stop.is_set():
            try:
                await self.store.providers.prune(keep)
            except StoreError:
                log.warning("could not prune provider permits (the database is unavailable)")
            await self.clock.wait(stop, PRUNE_EVERY)

    # --- one call ---------------------------------------------------------------------------------------

    async def acquire(self, provider: str, *, tokens: int, run_id: int | None, lease: float, within: float,
                      wait_out_pause: bool = True) -> Permit | NoPermit:
        """Leave to call ``provider`` with a call of about ``tokens`` tokens that may take ``lease`` seconds,
        waiting at most ``within`` seconds for it. A paused provider: ``NoPermit("paused")`` at once unless
        ``wait_out_pause`` (there is nobody else to ask) and the pause ends within ``within``."""
        limits = self.limits_of(provider)
        if not limits.limited:
            paused_for = await self.store.providers.paused_for(provider)
            if paused_for is None:
                return Permit(provider, None)
            if not wait_out_pause or paused_for > within:
                return NoPermit(provider, "paused", paused_for)
            log.info("a call to %s waits %.1fs for the provider's pause to end", provider, paused_for,
                     extra={"run": run_id, "provider": provider})
            await self.clock.sleep(paused_for)
            return Permit(provider, None)
        lease = min(lease, limits.call_seconds) + LEASE_MARGIN
        async with self.store.transaction("take_permit") as tx:
            locked = await tx.providers.lock(provider)
            if locked.paused_for is not None and (not wait_out_pause or locked.paused_for > within):
                return NoPermit(provider, "paused", locked.paused_for)
            # Nobody overtakes: with calls already waiting, this one waits behind them.
            ahead = await tx.providers.waiting(provider, 1)
            granted = False
            if not ahead:
                load = replace(await tx.providers.load(provider, limits.counted_over), paused_for=locked.paused_for)
                granted = room(limits, load, [tokens]).grant == 1
            permit = await tx.providers.ask(provider, self.worker_id, run_id, tokens, lease_seconds=lease,
                                            granted=granted, look_within=LOOK_WITHIN)
        if granted:
            return Permit(provider, permit)
        log.info("a call to %s waits for a permit (its limits: %s)", provider, limits_said(limits),
                 extra={"run": run_id, "provider": provider})
        return await self._wait(provider, permit, within, run_id)

    async def pause(self, provider: str, seconds: float, reason: str) -> None:
        """The provider asked everyone to wait ``seconds`` (a retry-after): no worker calls it before then."""
        seconds = min(seconds, LONGEST_PAUSE)
        log.warning("provider %s asked to wait %.1fs: paused for every worker (%s)", provider, seconds, reason,
                    extra={"provider": provider})
        try:
            await self.store.providers.pause(provider, seconds, reason)
        except StoreError:
            log.warning("could not record the pause of %s; other workers will learn it for themselves", provider)

    async def release(self, permit: Permit, *, tokens: int | None = None) -> None:
        """The call returned: hand its permit back (with the tokens it used, when known)."""
        if permit.id is None:
            return
        try:
            await self.store.providers.release(permit.id, tokens)
        except StoreError:
            log.warning("could not hand back a permit to %s; its lease will run out", permit.provider)

    # --- waiting ------------------------------------------------------------------------------------------

    async def _wait(self, provider: str, permit: int, within: float, run_id: int | None) -> Permit | NoPermit:
        line = self._lines.setdefault(provider, _Line())
        granted = asyncio.Event()
        line.waiting[permit] = granted
        if line.looking is None or line.looking.done():
            line.looking = self._tasks.spawn(self._look(provider, line), name=f"permits-{provider}")
        else:
            line.wake.set()
        started = self.clock.monotonic()
        try:
            got = await self.clock.wait(granted, within)
        except asyncio.CancelledError:
            line.waiting.pop(permit, None)
            await asyncio.shield(self._abandon(Permit(provider, permit)))
            raise
        line.waiting.pop(permit, None)
        if got:
            return Permit(provider, permit)
        waited = self.clock.monotonic() - started
        # Granted in the moment it gave up? Then it is this call's.
        if not await self.store.providers.withdraw(permit):
            return Permit(provider, permit)
        log.warning("a call to %s waited %.1fs for a permit and could wait no longer", provider, waited,
                    extra={"run": run_id, "provider": provider})
        return NoPermit(provider, "busy", waited)

    async def _abandon(self, permit: Permit) -> None:
        """A waiting call that will never be made (its run was stopped): out of line, or handed back."""
        assert permit.id is not None
        try:
            if not await self.store.providers.withdraw(permit.id):
                await self.store.providers.release(permit.id, 0)
        except StoreError:
            log.warning("could not take an abandoned call to %s out of line; it drops out on its own",
                        permit.provider)

    async def _look(self, provider: str, line: _Line) -> None:
        """While this process has calls waiting for ``provider``: grant those that may go now, then sleep until
        a permit is handed back anywhere or room will be made."""
        limits = self.limits_of(provider)
        while line.waiting:
            line.wake.clear()
            try:
                wait = await self._grant(provider, limits, line)
            except StoreError as exc:
                log.warning("could not look at the line for %s (%s); looking again in 1s", provider, exc)
                wait = 1.0
            if line.waiting:
                await self.clock.wait(line.wake, wait)

    async def _grant(self, provider: str, limits: ProviderLimits, line: _Line) -> float:
        """One look at the line: grant this process's calls among those at its head that may go now; wake the
        other processes when the head is theirs. How long until it is worth looking again."""
        ours = set(line.waiting)
        async with self.store.transaction("grant_permits") as tx:
            locked = await tx.providers.lock(provider)
            queue = await tx.providers.waiting(provider, LINE_LOOK)
            load = replace(await tx.providers.load(provider, limits.counted_over), paused_for=locked.paused_for)
            verdict = room(limits, load, [w.tokens for w in queue])
            head = queue[:verdict.grant]
            granted = await tx.providers.grant([w.id for w in head if w.id in ours]) if head else []
            still = [pid for pid in ours if pid not in granted]
            if still:
                await tx.providers.keep_waiting(still, LOOK_WITHIN)
            if any(w.worker != self.worker_id or w.id not in ours for w in head):
                await tx.providers.wake(provider)
        for pid in granted:
            event = line.waiting.pop(pid, None)
            if event is not None:
                event.set()
        # Nothing of ours could go although there was room (the head is another's): look again soon anyway.
        return verdict.wait if verdict.wait > 0 else (0.0 if granted else 0.2)


def limits_said(limits: ProviderLimits) -> str:
    parts = []
    if limits.max_in_flight is not None:
        parts.append(f"{limits.max_in_flight} in flight")
    if limits.requests_per_minute is not None:
        parts.append(f"{limits.requests_per_minute} requests/min")
    if limits.tokens_per_minute is not None:
        parts.append(f"{limits.tokens_per_minute} tokens/min")
    return ", ".join(parts)
