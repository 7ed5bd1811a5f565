"""Holding one claimed run: step it until it is finished or its wall-clock budget is spent, then hand it
back. I/O around the pure ``decide`` (``engine/core/loop.py``).

- No transaction is held open across a model or tool call.
- Every write is fenced on ``lease_owner`` and reads the cancel flag (and how many lines have joined the run,
  and the database's time) in the same commit; a fence that matches no row raises ``LeaseLost`` and the
  hold stops at once.
- A tool call is recorded before it runs, and runs only if that same commit read "not cancelled"; its result
  is capped to the context's token budget before it is recorded. While it runs (no step is written then, and a
  tool may take longer than the lease) the lease is kept (``engine/run/lease.py``): renewed every third of it,
  fenced; a renewal that finds the run held by another stops the tool and the hold (``LeaseLost``).
- A tool call that never reported back is closed with the first result of the call when the tool has side
  effects and it finished (``tool_calls``, keyed by run and call id: the runner's), else as interrupted; it is
  never run again.
- A model call is priced at its worst case before it is made, within what is left of the run's budget (its
  ``max_tokens`` lowered to fit; not made at all, and the run out of money, when its input alone does not fit).
  It is recorded as started, with that worst case drawn from the run's reservation, before it is made (and only
  by a commit that read "not cancelled"), so a call paid for whose answer is never recorded is still counted;
  the step that records what it cost settles the draw to the real cost in the same commit.
- A model call is followed while it is made (``engine.providers.base.Watch``): a cancel heard meanwhile
  (``engine/run/cancels.py``) aborts it — its connection closed, so the provider stops generating and billing —
  and the step records it at its worst case; for a surface that answers as it comes, its words are told as
  they arrive (``engine/run/pieces.py``), the answer still recorded and delivered whole.
- The answer (or the ending), the spend settled and its delivery to the surface are one commit.
- ``decide`` is handed the database's time — read with the claim and with every fenced write, carried forward
  by this process's monotonic clock — never this process's wall clock: ``started_at`` is the database's too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from engine.clock import Clock
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.content.commands import command_prompt
from engine.core.limits import DEFAULT_LIMITS, Limits
from engine.core.loop import (
    CallModel,
    CloseInterrupted,
    CloseModelCall,
    End,
    Finished,
    RunTool,
    RunView,
    Say,
    decide,
    left,
)
from engine.core.memory import with_memory
from engine.core.messages import (
    AnswerStep,
    EndingStep,
    HeardStep,
    ModelRequest,
    ModelStartedStep,
    ModelStep,
    Step,
    ToolCall,
    ToolCallStep,
    ToolResultStep,
    conversation,
    dump_step,
    heard,
    load_step,
    withheld,
)
from engine.core.prompt import capped, later_of, opening, said_since
from engine.errors import LeaseLost, MemoryUnavailable, StoreError
from engine.logfields import about_run
from engine.memory.recall import Recall, Remembered, remembered
from engine.meter import NO_METER, Meter
from engine.providers.base import Answerer, Watch
from engine.run.cancels import Cancels
from engine.run.lease import kept
from engine.run.pieces import Pieces
from engine.store import Store, Tx
from engine.store.runs import Claim, Run
from engine.surface import Answered, Ended, Opened, Opener, Outcome, RunInfo, Surface
from engine.tools.base import WITHHELD_ARGUMENTS, Offered, RunRef
from engine.tools.runner import ToolRunner

log = logging.getLogger(__name__)

# What the model is told about a tool call that never reported back. Tools run at most once.
INTERRUPTED = "This tool call was interrupted before its result was recorded; it may or may not have taken effect."
# What ``summon runs`` shows for a model call started and never reported back (the model never sees it).
INTERRUPTED_CALL = "the model call was interrupted before its answer was recorded; counted at its estimate"


class Hold:
    """One run, claimed by ``owner``, worked on until it is done or ``budget_seconds`` have passed."""

    def __init__(self, claim: Claim, *, store: Store, registry: Callable[[], Registry], answerer: Answerer,
                 surface: Surface | None, toolbox: ToolRunner, clock: Clock, owner: str, lease_seconds: float,
                 budget_seconds: float, recall: Recall | None = None, meter: Meter | None = None,
                 openers: Mapping[str, Opener] | None = None, cancels: Cancels | None = None,
                 streams: bool = False) -> None:
        """``cancels``: what tells a call under way that its run was asked to stop (None: the flag is read at the
        next step, as ever). ``streams``: the run's surface answers as it comes, so its words are told as the
        model says them."""
        self.row = claim.run
        self.run = RunInfo.of(claim.run)
        self.store = store
        self._registry = registry
        self.answerer = answerer
        self.surface = surface
        self.toolbox = toolbox
        self.clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.budget_seconds = budget_seconds
        self.view = _view(claim.run)
        # How many lines had joined the run at the last fenced write (read in the same commit), and the
        # database's time then, with this process's monotonic clock at that moment.
        self.joined = len(later_of(claim.run.context))
        self._seen = (claim.now, clock.monotonic())
        self.remembered = Remembered()  # what the bot remembers of the run's person (read once, on taking it)
        self.recall = recall
        self.answered = False
        self.meter = meter or NO_METER
        self.openers = openers or {}
        self.cancels = cancels
        self.streams = streams
        self.standing: Opened | None = None  # the context's sealed standing note, opened on taking the run
        # Steps written in the transaction under way, told to the meter once it commits; and when the run's
        # previous step was (how long a step took).
        self._unmetered: list[Step] = []
        self._last_step = clock.monotonic()

    async def __call__(self) -> None:
        # Every line logged while this run is held (here, in a provider, in a tool) says which run it is.
        with about_run(self.run.id, self.run.bot, self.run.place):
            await self._hold()

    async def _hold(self) -> None:
        run = self.run
        started = self.clock.monotonic()
        steps = await self.steps()
        bot = self._registry().get(run.bot)
        memory = bot.memory if bot else "thread"
        self.remembered = await remembered(self.store, self.surface, self.row, memory, self.recall,
                                           names=self._names())
        self.standing = await self._opened(self.row.context)
        facts = await self.toolbox.asker(self.row)
        log.info("holding run %s", run.id, extra={"run": run.id, "bot": run.bot, "worker": self.owner})
        if self.surface is not None:
            await self.surface.working(run, True)
        try:
            await self._step_until_done(steps, started, facts)
            if self.answered and memory == "person+recall" and self.remembered.tells and self.recall is not None:
                await self._remember()
        except asyncio.CancelledError:
            # Shutting down: release the lease so another worker takes the run at once, not after expiry.
            await asyncio.shield(self._release_quietly())
            raise
        finally:
            if self.surface is not None:
                await self.surface.working(run, False)

    def _names(self) -> tuple[str, ...]:
        """What the run's bot is called, as a person addresses it (its name, its user)."""
        bot = self._registry().get(self.run.bot)
        return (bot.name, bot.user_id) if bot is not None else ()

    async def _opened(self, context: Mapping[str, Any]) -> Opened | None:
        """The standing note a surface keeps sealed off the row, opened by the opener the context names."""
        standing = context.get("standing")
        if not isinstance(standing, Mapping):
            return None
        opener = self.openers.get(str(standing.get("by")))
        if opener is None:
            log.warning("run %s names a standing note nobody here can open (%s)", self.run.id, standing.get("by"),
                        extra={"run": self.run.id, "bot": self.run.bot})
            return None
        return await opener(context)

    async def _remember(self) -> None:
        """person+recall: what the person said, kept after the answer went (never before: a run that fails
        remembers nothing); a memory that cannot be kept is logged, the answer stands."""
        try:
            await self.recall.remember(self.store, self.row, names=self._names())  # type: ignore[union-attr]
        except (StoreError, MemoryUnavailable) as exc:
            log.warning("run %s: what the person said could not be remembered (%s)", self.run.id, exc,
                        extra={"run": self.run.id, "bot": self.run.bot})

    async def _release_quietly(self) -> None:
        try:
            await self.store.runs.hand_back(self.run.id, self.owner)
        except StoreError:
            log.warning("could not hand run %s back at shutdown; the sweep will", self.run.id)

    async def _step_until_done(self, steps: list[Step], started: float, facts: AudienceFacts | None) -> None:
        run = self.run
        ref = RunRef(run.id, run.bot, run.surface, run.place, run.thread)
        context: dict[str, Any] = self.row.context
        while True:
            action = decide(self.view, steps, self.now())
            if isinstance(action, Finished):
                return
            if isinstance(action, Say | End):
                if await self._finish(steps, [], action):
                    return
                continue
            if isinstance(action, CallModel):
                # The context is read again only when the last fenced write saw more joined lines than the
                # run has heard (a line joining after that is caught when the run finishes).
                if self.joined > len(later_of(context)):
                    context = await self.store.runs.context(run.id)
                text, count = said_since(context, heard(steps))
                cancelled = bool(count) and await self.record(steps, HeardStep(text, count))
                # Watched from before the commit that reads "not cancelled" for it: a cancel after that commit is
                # heard while the call is made.
                with self._watching() as stop:
                    if not cancelled:
                        request, turn = self._request(context, steps, self._offer(ref, steps, facts))
                        allowance = left(self.view, steps)
                        estimate = self.answerer.estimate(request, turn=turn, allowance=allowance)
                        if estimate is None:
                            # Even the call's input costs more than is left: nothing is bought.
                            log.info("run %s: the next model call's input alone would cost more than the %.6f USD "
                                     "left; out of money", run.id, allowance, extra={"run": run.id, "bot": run.bot})
                            if await self._finish(steps, [], End("out_of_money")):
                                return
                            continue
                        # Recorded before the call is made, with what it may cost, and only in a commit that read
                        # "not cancelled": a call paid for and never recorded is still counted (``decide``).
                        cancelled = await self.record(steps, ModelStartedStep(estimate), unless_cancelled=True)
                    if not cancelled:
                        cancelled, last = await self._call_model(request, turn, steps, allowance, stop)
                if not cancelled:
                    then = decide(self.view, [*steps, last], self.now())
                    if isinstance(then, Say | End):
                        # The model's last word ends the run: record it, the answer (or ending) and the
                        # delivery in one commit rather than two — unless the asker said more meanwhile.
                        if await self._finish(steps, [last], then):
                            return
                        continue
                    cancelled = await self.record(steps, last)
            elif isinstance(action, CloseModelCall):
                log.warning("run %s: a model call was started and never recorded (a crash or a lost lease); "
                            "counted at its estimate, %.4f USD", run.id, action.estimate_usd,
                            extra={"run": run.id, "bot": run.bot})
                cancelled = await self.record(steps, ModelStep(
                    error=INTERRUPTED_CALL, error_class="provider", cost_usd=action.estimate_usd, interrupted=True))
            elif isinstance(action, RunTool):
                cancelled = await self.record(steps, ToolCallStep(action.call))
                if not cancelled:
                    # Checked against what the model was offered when it asked (the steps before its turn),
                    # so a skill opened in the same turn does not hand over that skill's tools.
                    offer = self._offer(ref, _before_last_turn(steps), facts)
                    content, is_error = await kept(
                        self.toolbox.run(ref, offer, action.call.name, action.call.arguments, call_id=action.call.id,
                                         holder=self.owner),
                        store=self.store, run_id=run.id, owner=self.owner, lease_seconds=self.lease_seconds)
                    # Capped before it is recorded, so what reaches the model stays within the context's budget.
                    cancelled = await self.record(steps, ToolResultStep(action.call.id, capped(content), is_error=is_error))
            elif isinstance(action, CloseInterrupted):
                first = await self.toolbox.first_result(run.id, action.call.id)
                if first is None:
                    cancelled = await self.record(
                        steps, ToolResultStep(action.call.id, INTERRUPTED, is_error=True, interrupted=True))
                else:
                    log.info("run %s: tool call %s was done before its result was recorded; its first result is "
                             "recorded", run.id, action.call.id, extra={"run": run.id, "bot": run.bot})
                    cancelled = await self.record(steps, ToolResultStep(action.call.id, capped(first[0]),
                                                                        is_error=first[1]))
            else:  # pragma: no cover - the Action union is closed
                raise AssertionError(action)
            if cancelled:
                self.view = replace(self.view, cancel_requested=True)
                continue
            if self.clock.monotonic() - started >= self.budget_seconds:
                await self._hand_back()
                return

    def _offer(self, ref: RunRef, steps: list[Step], facts: AudienceFacts | None) -> Offered:
        only = self.standing.tools if self.standing is not None else None
        return self.toolbox.offer(ref, steps, facts, only=only)

    def _asked(self, registry: Registry, context: dict[str, Any]) -> str:
        """What the run asks: a command's prompt, resolved here from the command as published; otherwise
        what the person said."""
        if "command" not in context:
            return self.row.prompt
        resolved = command_prompt(registry.commands, registry.strings, context)
        if resolved is None:
            log.warning("run %s was a command that is gone; it asks what the person said", self.run.id,
                        extra={"run": self.run.id, "bot": self.run.bot})
            return self.row.prompt
        return resolved

    def _request(self, context: dict[str, Any], steps: list[Step], offer: Offered) -> tuple[ModelRequest, int]:
        """The next model call with what this run may use, and which turn of the run it is."""
        registry = self._registry()
        bot = registry.get(self.run.bot)
        system = bot.prompt if bot is not None else ""
        skills = offer.skills_section(registry.strings.get("skills", "header") or "")
        if skills:
            system = f"{system}\n\n{skills}" if system else skills
        if self.standing is not None:
            context = {**context, "note": self.standing.note}
        memory = with_memory(context, bot.memory if bot is not None else "thread", earlier=self.remembered.earlier,
                             recalled=self.remembered.recalled, words=registry.strings.section("context"))
        request = ModelRequest(
            system=system,
            messages=conversation(opening(memory, self._asked(registry, context)), steps),
            model=bot.model if bot is not None else None,
            tools=offer.tools,
        )
        return request, sum(1 for s in steps if isinstance(s, ModelStep) and s.error is None)

    @contextmanager
    def _watching(self) -> Iterator[asyncio.Event | None]:
        """The stop a cancel sets while the next call is made (None: nothing here hears cancels)."""
        with self.cancels.watching(self.run.id) if self.cancels is not None else nullcontext() as stop:
            yield stop

    async def _call_model(self, request: ModelRequest, turn: int, steps: list[Step], allowance: float,
                          stop: asyncio.Event | None = None) -> tuple[bool, ModelStep]:
        """Call the model, every attempt within ``allowance`` USD, followed by ``stop`` (and, for a surface that
        answers as it comes, by whoever listens); record every failed attempt before the last, and return the
        last unrecorded (with the cancel flag read while recording the others)."""
        pieces = Pieces(self.store, self.run.id, attempt=self.row.attempts, turn=turn) if self.streams else None
        watch = Watch(stop=stop or asyncio.Event(), said=pieces) if stop is not None or pieces is not None else None
        try:
            *earlier, last = await self.answerer.answer(request, turn=turn, allowance=allowance, run_id=self.run.id,
                                                        watch=watch)
        finally:
            if pieces is not None:
                await pieces.close()
        cancelled = False
        for attempt in earlier:
            cancelled = await self.record(steps, attempt) or cancelled
        return cancelled, last

    # --- fenced writes ------------------------------------------------------------------------------

    async def record(self, steps: list[Step], step: Step, *, unless_cancelled: bool = False) -> bool:
        """Record the next step, fenced; return the cancel flag read in the same commit. With
        ``unless_cancelled``, a commit that reads "cancelled" records nothing."""
        self._unmetered.clear()
        async with self.store.transaction("record_step") as tx:
            cancel = await self._fence(tx)
            if cancel and unless_cancelled:
                return cancel
            await self._insert_step(tx, len(steps) + 1, step)
        self._metered()
        steps.append(step)
        return cancel

    def _metered(self) -> None:
        """Tell the meter the steps the last commit recorded."""
        now = self.clock.monotonic()
        took, self._last_step = now - self._last_step, now
        for step in self._unmetered:
            model = step if isinstance(step, ModelStep) else None
            self.meter.step(step.kind, model.provider or None if model else None, took)
            took = 0.0  # the commit's first step took the time; the rest came with it
            if model is not None:
                if model.cost_usd:
                    self.meter.spent(self.run.bot, model.cost_usd)
                if model.error is not None and not model.gave_up and not model.interrupted:
                    self.meter.fallback(model.provider, model.reason or model.error_class or "unknown")
        self._unmetered.clear()

    async def _fence(self, tx: Tx) -> bool:
        fence = await tx.runs.fence(self.run.id, self.owner, self.lease_seconds)
        self.joined = fence.later
        self._seen = (fence.now, self.clock.monotonic())
        return fence.cancel_requested

    def now(self) -> datetime:
        """The database's time (the one clock every stored time comes from), as read at this run's last
        round trip and carried forward by this process's monotonic clock since."""
        then, at = self._seen
        return then + timedelta(seconds=max(0.0, self.clock.monotonic() - at))

    async def _insert_step(self, tx: Tx, seq: int, step: Step) -> None:
        self._unmetered.append(step)
        model = step if isinstance(step, ModelStep) else None
        await tx.runs.insert_step(
            self.run.id, seq, step.kind, dump_step(withheld(step, WITHHELD_ARGUMENTS)), owner=self.owner,
            provider=model.provider if model else None, model=model.model if model else None,
            tokens_in=model.tokens_in if model else 0, tokens_out=model.tokens_out if model else 0,
            cost_usd=model.cost_usd if model else 0,
        )
        # The run's reservation, in the same commit as the step: a call's worst case drawn before it is made,
        # settled to what it really cost when it is recorded.
        if isinstance(step, ModelStartedStep):
            await tx.people.draw(self.run.id, step.estimate_usd)
        elif model is not None:
            await tx.people.spend(self.run.id, model.cost_usd)

    async def _finish(self, steps: list[Step], pending: list[Step], action: Say | End) -> bool:
        self._unmetered.clear()
        done = await self._finish_in_one_commit(steps, pending, action)
        self._metered()
        if done:
            last = steps[-1]
            self.meter.run_finished(self.run.bot, last.ending if isinstance(last, EndingStep) else "answered")
        return done

    async def _finish_in_one_commit(self, steps: list[Step], pending: list[Step], action: Say | End) -> bool:
        """Record ``pending`` steps and the final one, finish the run and hand the outcome to the surface,
        in one commit. A cancel that arrived meanwhile wins over an answer: the person said stop. Words
        the asker added meanwhile (read under the fence's row lock, so a joining line either is seen here
        or starts a run of its own) make the answer a draft when the run may still ask the model: they are
        recorded and False is returned, so the model is asked again."""
        run = self.run
        async with self.store.transaction("finish_run") as tx:
            if await self._fence(tx) and not (isinstance(action, End) and action.ending == "cancelled"):
                action = End("cancelled")
            if isinstance(action, Say) and self.joined > heard([*steps, *pending]):
                context = await tx.runs.context(run.id)
                text, count = said_since(context, heard([*steps, *pending]))
                more = [*steps, *pending, HeardStep(text, count)]
                if count and not isinstance(decide(self.view, more, self.now()), CallModel):
                    # Out of steps, money or time: the answer it has is said rather than thrown away.
                    log.info("run %s: the asker said more, but the run may not ask the model again; answering",
                             run.id, extra={"run": run.id, "bot": run.bot})
                    count = 0
                if count:
                    for n, step in enumerate([*pending, HeardStep(text, count)], start=len(steps) + 1):
                        await self._insert_step(tx, n, step)
                    steps.extend([*pending, HeardStep(text, count)])
                    log.info("run %s: the asker said more before the answer went out; asking again", run.id,
                             extra={"run": run.id, "bot": run.bot})
                    return False
            outcome: Outcome
            if isinstance(action, Say):
                final: Step = AnswerStep(action.text)
                outcome = Answered(action.text)
                self.answered = True
                status, ending, reason, answer = "done", None, None, action.text
            else:
                final = EndingStep(action.ending, action.reason)
                outcome = Ended(action.ending, action.reason)
                status = {"cancelled": "cancelled", "failed": "failed"}.get(action.ending, "done")
                ending, reason, answer = action.ending, action.reason or None, None
            for n, step in enumerate([*pending, final], start=len(steps) + 1):
                await self._insert_step(tx, n, step)
            await tx.runs.finish(run.id, self.owner, status=status, ending=ending, reason=reason, answer=answer)
            await tx.people.settle(run.id)
            if self.surface is not None:
                await self.surface.deliver(tx, run, outcome)
        steps.extend([*pending, final])
        log.info("run %s finished: %s", run.id, ending or "answered", extra={"run": run.id, "bot": run.bot})
        return True

    async def _hand_back(self) -> None:
        if not await self.store.runs.hand_back(self.run.id, self.owner):
            raise LeaseLost(self.run.id, self.owner)
        log.info("run %s handed back after its budget", self.run.id, extra={"run": self.run.id})

    async def steps(self) -> list[Step]:
        return [load_step(payload) for payload in await self.store.runs.steps(self.run.id)]


def _view(row: Run) -> RunView:
    limits = row.limits or {}
    asked = row.context.get("command")
    tool = asked.get("tool") if isinstance(asked, Mapping) else None
    args = asked.get("args") if isinstance(asked, Mapping) else None
    direct = ToolCall("command", tool, dict(args) if isinstance(args, Mapping) else {}) if isinstance(tool, str) else None
    return RunView(
        id=row.id,
        limits=Limits(steps=int(limits.get("steps", DEFAULT_LIMITS.steps)),
                      spend=float(limits.get("spend", DEFAULT_LIMITS.spend)),
                      minutes=float(limits.get("minutes", DEFAULT_LIMITS.minutes))),
        started_at=row.started_at or row.created_at,
        cancel_requested=row.cancel_requested, direct=direct,
    )


def _before_last_turn(steps: list[Step]) -> list[Step]:
    """The steps before the model's latest answered turn: what its offer was worked out from."""
    for n in range(len(steps) - 1, -1, -1):
        step = steps[n]
        if isinstance(step, ModelStep) and step.error is None:
            return steps[:n]
    return steps
