"""The worker: claim a run, hold it by id, step it until it is finished or its wall-clock budget is spent,
then hand it back. I/O around the pure ``loop.decide``.

- The claim is one short autocommit statement; no transaction is held open across a model or tool call.
- Every write is fenced on ``lease_owner`` and reads the cancel flag in the same commit; 0 rows means
  the lease was lost and the worker stops at once.
- A tool call is recorded before it runs, and runs only if that same commit read "not cancelled".
- Handing back releases the lease; the status change NOTIFYs, so the next worker starts at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from engine.clock import Clock
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.core.commands import command_prompt
from engine.core.limits import DEFAULT_LIMITS, Limits
from engine.core.loop import (
    CallModel,
    CloseInterrupted,
    End,
    Finished,
    RunTool,
    RunView,
    Say,
    decide,
)
from engine.core.messages import (
    AnswerStep,
    EndingStep,
    HeardStep,
    ModelRequest,
    ModelStep,
    Step,
    ToolCallStep,
    ToolResultStep,
    conversation,
    dump_step,
    heard,
    load_step,
)
from engine.core.prompt import later_of, opening, said_since
from engine.errors import LeaseLost, StoreError
from engine.providers.base import Answerer, ProviderStatus
from engine.store import Store, Tx
from engine.store.runs import Claim, Run
from engine.surface import Answered, Ended, Outcome, RunInfo, Surface
from engine.tasks import TaskGroup
from engine.tools.base import ContentTools, Offered, RunRef, ToolFn
from engine.tools.runner import SiteClasses, ToolRunner

log = logging.getLogger(__name__)


# What the model is told about a tool call that never reported back. Tools run at most once.
INTERRUPTED = "This tool call was interrupted before its result was recorded; it may or may not have taken effect."


@dataclass(frozen=True)
class WorkerSettings:
    slots: int = 2
    budget_seconds: float = 60.0
    lease_seconds: float = 90.0
    sweep_seconds: float = 10.0
    poll_seconds: float = 5.0
    sweep_batch: int = 1000
    heartbeat_seconds: float = 10.0


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self,
        store: Store,
        registry: Callable[[], Registry],
        answerer: Answerer,
        surfaces: Mapping[str, Surface],
        clock: Clock,
        settings: WorkerSettings,
        *,
        tools: Mapping[str, ToolFn] | None = None,
        harness: Mapping[str, ToolFn] | None = None,
        content_tools: ContentTools | None = None,
        site_classes: SiteClasses | None = None,
        worker_id: str | None = None,
        status: ProviderStatus | None = None,
    ) -> None:
        """``tools``, ``content_tools`` and ``site_classes`` are the run's hands (``engine.tools.runner``);
        ``harness`` are a test's or a bench's own tools, offered to every run (never in production)."""
        self.store = store
        self._registry = registry
        self.answerer = answerer
        self.surfaces = surfaces
        self.clock = clock
        self.settings = settings
        self.toolbox = ToolRunner(registry, surfaces, store, tools=tools, harness=harness,
                                  content_tools=content_tools, site_classes=site_classes)
        self.id = worker_id or new_worker_id()
        self.status = status or ProviderStatus(usable=True, mode="stand-in")
        self._wake = asyncio.Event()
        # Per held run: how many lines had joined it at its last fenced write (read in the same commit), and
        # the database's time then (with this process's monotonic clock at that moment).
        self._joined: dict[int, int] = {}
        self._seen: dict[int, tuple[datetime, float]] = {}
        self._generation = 0

    # --- the long-running parts --------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and hold runs with ``slots`` concurrent slots, woken by NOTIFY, until ``stop`` is set."""
        try:
            async with TaskGroup("worker") as group:
                group.spawn(self.store.listen("summon_runs", self._poke, stop), name="worker-listen")
                for n in range(self.settings.slots):
                    group.spawn(self._slot(n, stop), name=f"worker-slot-{n}")
                group.spawn(self._sweeper(stop), name="worker-sweep")
                group.spawn(self._heartbeat(stop), name="worker-heartbeat")
                await stop.wait()
                self._poke()
        finally:
            try:
                await self.store.workers.forget(self.id)
            except StoreError:
                log.warning("could not take this worker's provider status down; it will go stale")

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        """Say on start and every heartbeat whether this worker can answer model calls (SPEC §2)."""
        s = self.status
        while not stop.is_set():
            try:
                await self.store.workers.beat(self.id, usable=s.usable, mode=s.mode, providers=list(s.providers))
            except StoreError:
                log.warning("could not record the provider status (the database is unavailable)")
            await self.clock.wait(stop, self.settings.heartbeat_seconds)

    def _poke(self) -> None:
        self._generation += 1
        self._wake.set()

    async def _slot(self, n: int, stop: asyncio.Event) -> None:
        while not stop.is_set():
            seen = self._generation
            try:
                held = await self.work_once()
            except StoreError:
                log.warning("worker slot %s: the database is unavailable; retrying in 1s", n)
                await self.clock.sleep(1)
                continue
            if held or stop.is_set():
                continue
            if self._generation != seen:
                continue
            self._wake.clear()
            await self.clock.wait(self._wake, self.settings.poll_seconds)

    async def _sweeper(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.sweep()
            except StoreError:
                log.warning("lease sweep failed (the database is unavailable); will try again")
            await self.clock.wait(stop, self.settings.sweep_seconds)

    # --- one claim, one run -----------------------------------------------------------------------

    async def work_once(self) -> bool:
        """Claim one run and hold it. False when nothing was claimable."""
        claim = await self.store.runs.claim(self.id, self.settings.lease_seconds)
        if claim is None:
            return False
        try:
            await self.hold(claim)
        except LeaseLost as exc:
            log.warning("%s; stopping work on it", exc, extra={"run": claim.run.id})
        return True

    async def hold(self, claim: Claim) -> None:
        row = claim.run
        run = RunInfo.of(row)
        self._seen[run.id] = (claim.now, self.clock.monotonic())
        view = _view(row)
        surface = self.surfaces.get(run.surface)
        started = self.clock.monotonic()
        steps = await self._steps(run.id)
        facts = await self.toolbox.asker(row)
        log.info("holding run %s", run.id, extra={"run": run.id, "bot": run.bot, "worker": self.id})
        if surface is not None:
            await surface.working(run, True)
        self._joined[run.id] = len(later_of(row.context))
        try:
            await self._step_until_done(run, row, view, steps, surface, started, facts)
        except asyncio.CancelledError:
            # Shutting down: release the lease so another worker takes the run at once, not after expiry.
            await asyncio.shield(self._release_quietly(run))
            raise
        finally:
            self._joined.pop(run.id, None)
            self._seen.pop(run.id, None)
            if surface is not None:
                await surface.working(run, False)

    async def _release_quietly(self, run: RunInfo) -> None:
        try:
            await self.store.runs.hand_back(run.id, self.id)
        except StoreError:
            log.warning("could not hand run %s back at shutdown; the sweep will", run.id)

    async def _step_until_done(
        self, run: RunInfo, row: Run, view: RunView, steps: list[Step],
        surface: Surface | None, started: float, facts: AudienceFacts | None,
    ) -> None:
        ref = RunRef(run.id, run.bot, run.surface, run.room_id, run.thread_root)
        context: dict[str, Any] = row.context
        while True:
            action = decide(view, steps, self._now(run.id))
            if isinstance(action, Finished):
                return
            if isinstance(action, Say | End):
                if await self._finish(run, view, steps, [], action, surface):
                    return
                continue
            if isinstance(action, CallModel):
                # The context is read again only when the last fenced write saw more joined lines than the
                # run has heard (a line joining after that is caught when the run finishes).
                if self._joined.get(run.id, 0) > len(later_of(context)):
                    context = await self.store.runs.context(run.id)
                text, count = said_since(context, heard(steps))
                cancelled = bool(count) and await self._record(run.id, steps, HeardStep(text, count))
                if not cancelled:
                    cancelled, last = await self._call_model(row, context, steps, self.toolbox.offer(ref, steps, facts))
                if not cancelled:
                    then = decide(view, [*steps, last], self._now(run.id))
                    if isinstance(then, Say | End):
                        # The model's last word ends the run: record it, the answer (or ending) and the
                        # delivery in one commit rather than two — unless the asker said more meanwhile.
                        if await self._finish(run, view, steps, [last], then, surface):
                            return
                        continue
                    cancelled = await self._record(run.id, steps, last)
            elif isinstance(action, RunTool):
                cancelled = await self._record(run.id, steps, ToolCallStep(action.call))
                if not cancelled:
                    # Checked against what the model was offered when it asked (the steps before its turn),
                    # so a skill opened in the same turn does not hand over that skill's tools.
                    offer = self.toolbox.offer(ref, _before_last_turn(steps), facts)
                    result = await self.toolbox.run(ref, offer, action.call.name, action.call.arguments)
                    cancelled = await self._record(
                        run.id, steps, ToolResultStep(action.call.id, result[0], is_error=result[1]),
                    )
            elif isinstance(action, CloseInterrupted):
                cancelled = await self._record(
                    run.id, steps, ToolResultStep(action.call.id, INTERRUPTED, is_error=True, interrupted=True),
                )
            else:  # pragma: no cover - the Action union is closed
                raise AssertionError(action)
            if cancelled:
                view = RunView(view.id, view.limits, view.started_at, cancel_requested=True)
                continue
            if self.clock.monotonic() - started >= self.settings.budget_seconds:
                await self._hand_back(run)
                return

    def _asked(self, registry: Registry, context: dict[str, Any], row: Run) -> str:
        """What the run asks: a command's prompt, resolved here from the command as published; otherwise
        what the person said."""
        if "command" not in context:
            return row.prompt
        resolved = command_prompt(registry.commands, registry.strings, context)
        if resolved is None:
            log.warning("run %s was a command that is gone; it asks what the person said", row.id,
                        extra={"run": row.id, "bot": row.bot})
            return row.prompt
        return resolved

    async def _call_model(self, row: Run, context: dict[str, Any], steps: list[Step],
                          offer: Offered) -> tuple[bool, ModelStep]:
        """Call the model with what this run may use; record every failed attempt before the last, and
        return the last unrecorded (with the cancel flag read while recording the others)."""
        registry = self._registry()
        bot = registry.get(row.bot)
        system = bot.prompt if bot is not None else ""
        skills = offer.skills_section(registry.strings.get("skills", "header") or "")
        if skills:
            system = f"{system}\n\n{skills}" if system else skills
        model = bot.model if bot is not None else None
        request = ModelRequest(
            system=system,
            messages=conversation(opening(context, self._asked(registry, context, row)), steps),
            model=model,
            tools=offer.tools,
        )
        turn = sum(1 for s in steps if isinstance(s, ModelStep) and s.error is None)
        *earlier, last = await self.answerer.answer(request, script=row.script, turn=turn)
        cancelled = False
        for attempt in earlier:
            cancelled = await self._record(row.id, steps, attempt) or cancelled
        return cancelled, last

    # --- fenced writes ------------------------------------------------------------------------------

    async def _record(self, run_id: int, steps: list[Step], step: Step) -> bool:
        """Record the next step, fenced; return the cancel flag read in the same commit."""
        async with self.store.transaction("record_step") as tx:
            cancel = await self._fence(tx, run_id)
            await self._insert_step(tx, run_id, len(steps) + 1, step)
        steps.append(step)
        return cancel

    async def _fence(self, tx: Tx, run_id: int) -> bool:
        fence = await tx.runs.fence(run_id, self.id, self.settings.lease_seconds)
        self._joined[run_id] = fence.later
        self._seen[run_id] = (fence.now, self.clock.monotonic())
        return fence.cancel_requested

    def _now(self, run_id: int) -> datetime:
        """The database's time (the one clock every stored time comes from), as read at this run's last
        round trip and carried forward by this process's monotonic clock since."""
        then, at = self._seen[run_id]
        return then + timedelta(seconds=max(0.0, self.clock.monotonic() - at))

    async def _insert_step(self, tx: Tx, run_id: int, seq: int, step: Step) -> None:
        model = step if isinstance(step, ModelStep) else None
        await tx.runs.insert_step(
            run_id, seq, step.kind, dump_step(step), owner=self.id,
            provider=model.provider if model else None, model=model.model if model else None,
            tokens_in=model.tokens_in if model else 0, tokens_out=model.tokens_out if model else 0,
            cost_usd=model.cost_usd if model else 0,
        )

    async def _finish(
        self, run: RunInfo, view: RunView, steps: list[Step], pending: list[Step], action: Say | End,
        surface: Surface | None,
    ) -> bool:
        """Record ``pending`` steps and the final one, finish the run and hand the outcome to the surface,
        in one commit. A cancel that arrived meanwhile wins over an answer: the person said stop. Words
        the asker added meanwhile (read under the fence's row lock, so a joining line either is seen here
        or starts a run of its own) make the answer a draft when the run may still ask the model: they are
        recorded and False is returned, so the model is asked again."""
        async with self.store.transaction("finish_run") as tx:
            if await self._fence(tx, run.id) and not (isinstance(action, End) and action.ending == "cancelled"):
                action = End("cancelled")
            if isinstance(action, Say) and self._joined.get(run.id, 0) > heard([*steps, *pending]):
                context = await tx.runs.context(run.id)
                text, count = said_since(context, heard([*steps, *pending]))
                more = [*steps, *pending, HeardStep(text, count)]
                if count and not isinstance(decide(view, more, self._now(run.id)), CallModel):
                    # Out of steps, money or time: the answer it has is said rather than thrown away.
                    log.info("run %s: the asker said more, but the run may not ask the model again; answering",
                             run.id, extra={"run": run.id, "bot": run.bot})
                    count = 0
                if count:
                    for n, step in enumerate([*pending, HeardStep(text, count)], start=len(steps) + 1):
                        await self._insert_step(tx, run.id, n, step)
                    steps.extend([*pending, HeardStep(text, count)])
                    log.info("run %s: the asker said more before the answer went out; asking again", run.id,
                             extra={"run": run.id, "bot": run.bot})
                    return False
            outcome: Outcome
            if isinstance(action, Say):
                final: Step = AnswerStep(action.text)
                outcome = Answered(action.text)
                status, ending, reason, answer = "done", None, None, action.text
            else:
                final = EndingStep(action.ending, action.reason)
                outcome = Ended(action.ending, action.reason)
                status = {"cancelled": "cancelled", "failed": "failed"}.get(action.ending, "done")
                ending, reason, answer = action.ending, action.reason or None, None
            for n, step in enumerate([*pending, final], start=len(steps) + 1):
                await self._insert_step(tx, run.id, n, step)
            await tx.runs.finish(run.id, self.id, status=status, ending=ending, reason=reason, answer=answer)
            await tx.people.settle(run.id)
            if surface is not None:
                await surface.deliver(tx, run, outcome)
        steps.extend([*pending, final])
        log.info("run %s finished: %s", run.id, ending or "answered", extra={"run": run.id, "bot": run.bot})
        return True

    async def _hand_back(self, run: RunInfo) -> None:
        if not await self.store.runs.hand_back(run.id, self.id):
            raise LeaseLost(run.id, self.id)
        log.info("run %s handed back after its budget", run.id, extra={"run": run.id})

    async def _steps(self, run_id: int) -> list[Step]:
        return [load_step(payload) for payload in await self.store.runs.steps(run_id)]

    # --- the sweep ------------------------------------------------------------------------------------

    async def sweep(self) -> int:
        """Re-queue runs whose worker died; a cancelled or worn-out one is ended where it was asked."""
        async with self.store.transaction("sweep_expired") as tx:
            rows = await tx.runs.sweep(self.settings.sweep_batch)
            for r in rows:
                if r.status in ("cancelled", "failed"):
                    await tx.people.settle(r.id)
                    full = await tx.runs.get(r.id)
                    assert full is not None
                    info = RunInfo.of(full)
                    surface = self.surfaces.get(info.surface)
                    if surface is not None:
                        await surface.deliver(tx, info, Ended("cancelled" if r.status == "cancelled" else "failed"))
        if rows:
            log.info("sweep: %d expired lease(s) handled", len(rows))
        return len(rows)


def _view(row: Run) -> RunView:
    limits = row.limits or {}
    return RunView(
        id=row.id,
        limits=Limits(steps=int(limits.get("steps", DEFAULT_LIMITS.steps)),
                      spend=float(limits.get("spend", DEFAULT_LIMITS.spend)),
                      minutes=float(limits.get("minutes", DEFAULT_LIMITS.minutes))),
        started_at=row.started_at or row.created_at,
        cancel_requested=row.cancel_requested,
    )


def _before_last_turn(steps: list[Step]) -> list[Step]:
    """The steps before the model's latest answered turn: what its offer was worked out from."""
    for n in range(len(steps) - 1, -1, -1):
        step = steps[n]
        if isinstance(step, ModelStep) and step.error is None:
            return steps[:n]
    return steps
