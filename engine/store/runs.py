"""Runs and their steps: summoned, claimed, held by a lease, fenced, finished, swept; and the side-effecting
tool calls keyed by run and call id (``sql/queries/runs.sql``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.errors import Conflict, LeaseLost
from engine.store.base import Family, maybe, row, rows


@dataclass(frozen=True, slots=True)
class Run:
    """A run's row (``agent_runs``)."""

    id: int
    bot: str
    surface: str
    place: str | None
    thread: str | None
    trigger_event: str | None
    asked_by: str | None
    subject: str | None
    prompt: str
    context: dict[str, Any]
    limits: dict[str, Any]
    status: str
    ending: str | None
    reason: str | None
    answer: str | None
    cancel_requested: bool
    lease_owner: str | None
    attempts: int
    max_attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    conversation: str | None


@dataclass(frozen=True, slots=True)
class Claim:
    """A run just claimed, and the database's time when it was."""

    run: Run
    now: datetime


@dataclass(frozen=True, slots=True)
class Fence:
    """What a fenced write read in its commit: the cancel flag, how many lines have joined the run, and
    the database's time."""

    cancel_requested: bool
    later: int
    now: datetime


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """What a side-effecting tool's call returned (``tool_calls``)."""

    result: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class Begun:
    """How beginning a side-effecting call went: ``first`` — it began now, so run it; otherwise it was begun
    before (the same run and call id), and ``result`` is what it returned (None: it never reported back)."""

    first: bool
    result: ToolCallResult | None = None


@dataclass(frozen=True, slots=True)
class Swept:
    id: int
    status: str


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One of a room's latest runs, with what it cost (``!bots runs``)."""

    id: int
    bot: str
    status: str
    ending: str | None
    asked_by: str | None
    created_at: datetime
    cost_usd: float


@dataclass(frozen=True, slots=True)
class BotSpend:
    bot: str
    today: float
    month: float


@dataclass(frozen=True, slots=True)
class InspectedRun:
    id: int
    bot: str
    place: str | None
    thread: str | None
    asked_by: str | None
    status: str
    ending: str | None
    reason: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    answer: str


@dataclass(frozen=True, slots=True)
class InspectedStep:
    seq: int
    kind: str
    provider: str | None
    model: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    worker: str | None
    payload: dict[str, Any]
    seconds: float | None


@dataclass(frozen=True, slots=True)
class WaitingRun:
    """A run that has waited a while: for a worker's slot (``provider`` None) or for a provider's permit, with
    how many are ahead of it in that line and how long it has waited (seconds)."""

    id: int
    bot: str
    surface: str
    place: str | None
    thread: str | None
    trigger_event: str | None
    asked_by: str | None
    ahead: int
    waited: float
    provider: str | None


@dataclass(frozen=True, slots=True)
class BotQueue:
    """What waits for one bot (``summon status``, ``/metrics``): runs queued for a worker's slot, runs held and
    waiting for a provider's permit (each with the oldest's wait in seconds, None when none), runs worked on."""

    bot: str
    queued: int
    oldest_queued: float | None
    waiting_for_provider: int
    oldest_waiting_for_provider: float | None
    running: int


class Runs(Family):
    __slots__ = ()

    # --- summoned -------------------------------------------------------------------------------------

    async def insert(self, *, bot: str, surface: str, place: str | None, thread: str | None,
                     trigger_event: str | None, asked_by: str | None, subject: str | None, prompt: str,
                     context: dict[str, Any], limits: dict[str, Any],
                     max_attempts: int, turn: int = 0, live_for: str | None = None) -> int | None:
        """The run's id; None when its trigger already summoned one (a replayed line). ``turn``: how many runs
        its asker already has waiting or running (the claim takes lower turns first); ``live_for``: asked by
        nobody, whose live runs it counts in (the person it reserves under)."""
        run_id = await self._value("insert_run", bot, surface, place, thread, trigger_event, asked_by,
                                   subject, prompt, context, limits, max_attempts, turn, live_for)
        return None if run_id is None else int(run_id)

    async def live_of(self, asked_by: str) -> int:
        """How many runs ``asked_by`` asked for (or that count for them) are waiting or running."""
        return int(await self._value("live_runs_of", asked_by))

    async def waiting_for(self, bot: str) -> int:
        """How many runs of ``bot`` wait: queued for a worker, or waiting for a provider's permit."""
        return int(await self._value("bot_waiting", bot))

    async def waiting(self, older_than: float, surface: str, limit: int = 1000) -> list[WaitingRun]:
        """Runs on ``surface`` that have waited at least ``older_than`` seconds for a slot or a permit."""
        return rows(WaitingRun, await self._all("waiting_runs", older_than, surface, limit))

    async def queue(self) -> list[BotQueue]:
        """What waits, by bot (queue depth and the oldest wait, for a slot and for a provider's permit)."""
        return rows(BotQueue, await self._all("run_queue"))

    async def get(self, run_id: int) -> Run | None:
        return maybe(Run, await self._one("get_run", run_id))

    async def join_live(self, *, bot: str, surface: str, asked_by: str, place: str, thread: str | None,
                        line: dict[str, Any], header: str | None) -> int | None:
        """Add ``line`` to the ``later`` of this person's live run with ``bot`` in this thread, asked on the same
        surface; its id, or None when there is none."""
        run_id = await self._value("join_live_run", bot, asked_by, place, thread, line, header, surface)
        return None if run_id is None else int(run_id)

    async def conversation_busy(self, bot: str, conversation: str) -> bool:
        return bool(await self._value("conversation_busy", bot, conversation))

    async def mark_conversation(self, run_id: int, conversation: str) -> None:
        await self._run("mark_run_conversation", run_id, conversation)

    # --- held ----------------------------------------------------------------------------------------

    async def claim(self, owner: str, lease_seconds: float) -> Claim | None:
        claims = await self.claim_up_to(owner, lease_seconds, 1)
        return claims[0] if claims else None

    async def claim_up_to(self, owner: str, lease_seconds: float, most: int) -> list[Claim]:
        """Up to ``most`` runs in one statement: the ones due first (they start together, in no order)."""
        return [Claim(row(Run, r), r["now"]) for r in await self._all("claim_runs", owner, lease_seconds, most)]

    async def fence(self, run_id: int, owner: str, lease_seconds: float) -> Fence:
        """Extend the lease while ``owner`` holds it; raises ``LeaseLost`` when it does not any more."""
        record = await self._one("fence_run", run_id, owner, lease_seconds)
        if record is None:
            raise LeaseLost(run_id, owner)
        return Fence(bool(record["cancel_requested"]), int(record["later"]), record["now"])

    async def keep_lease(self, run_id: int, owner: str, lease_seconds: float) -> None:
        """Extend the lease while ``owner`` holds it (a tool is running); raises ``LeaseLost`` when it does not."""
        if await self._value("keep_lease", run_id, owner, lease_seconds) is None:
            raise LeaseLost(run_id, owner)

    async def begin_tool_call(self, run_id: int, call_id: str, tool: str, owner: str) -> Begun:
        """Record a side-effecting call as begun, only while ``owner`` holds the lease (``LeaseLost`` otherwise);
        or, begun before, how it went."""
        record = await self._one("begin_tool_call", run_id, call_id, tool, owner)
        assert record is not None  # one row always
        if not record["held"]:
            raise LeaseLost(run_id, owner)
        if record["began"]:
            return Begun(first=True)
        done = None if record["result"] is None else ToolCallResult(record["result"], bool(record["is_error"]))
        return Begun(first=False, result=done)

    async def end_tool_call(self, run_id: int, call_id: str, owner: str, result: str, is_error: bool) -> None:
        """Record what a side-effecting call begun by ``owner`` returned (the lease need not be held still)."""
        await self._run("end_tool_call", run_id, call_id, owner, result, is_error)

    async def tool_call_result(self, run_id: int, call_id: str) -> ToolCallResult | None:
        """What a side-effecting call returned; None when it never began or never finished."""
        return maybe(ToolCallResult, await self._one("tool_call_result", run_id, call_id))

    async def insert_step(self, run_id: int, seq: int, kind: str, payload: dict[str, Any], *, owner: str,
                          provider: str | None = None, model: str | None = None, tokens_in: int = 0,
                          tokens_out: int = 0, cost_usd: float = 0.0) -> None:
        """Record step ``seq``; a second writer of the same step has lost the lease (``LeaseLost``)."""
        try:
            await self._run("insert_step", run_id, seq, kind, payload, provider, model, tokens_in, tokens_out,
                            cost_usd, owner)
        except Conflict as exc:
            raise LeaseLost(run_id, owner) from exc

    async def steps(self, run_id: int) -> list[dict[str, Any]]:
        """A run's steps' payloads, in order."""
        return [r["payload"] for r in await self._all("run_steps", run_id)]

    async def context(self, run_id: int) -> dict[str, Any]:
        """A run's context as it stands now (lines said while it works join it)."""
        context = await self._value("run_context", run_id)
        return context if isinstance(context, dict) else {}

    async def finish(self, run_id: int, owner: str, *, status: str, ending: str | None, reason: str | None,
                     answer: str | None) -> None:
        """The run is over, fenced on the lease (``LeaseLost`` when it is not held any more)."""
        if await self._value("finish_run", run_id, owner, status, ending, reason, answer) is None:
            raise LeaseLost(run_id, owner)

    async def hand_back(self, run_id: int, owner: str) -> bool:
        """Release the lease so the next worker takes the run at once; False when it was not held."""
        return await self._value("hand_back_run", run_id, owner) is not None

    async def sweep(self, batch: int) -> list[Swept]:
        """Re-queue (or end) up to ``batch`` runs whose lease expired."""
        return rows(Swept, await self._all("sweep_expired", batch))

    # --- told to stop --------------------------------------------------------------------------------

    async def cancel_requested_of(self, run_ids: list[int]) -> list[int]:
        """Which of ``run_ids`` have been asked to stop."""
        return [int(r["id"]) for r in await self._all("cancel_requested_of", run_ids)]

    async def tell_piece(self, channel: str, payload: str) -> None:
        """Tell whoever listens on ``channel`` a run's words as they come (``engine.run.pieces``)."""
        await self._value("tell_piece", channel, payload)

    async def request_cancel(self, place: str, thread: str | None, asker: str | None) -> list[int]:
        """Ask the unfinished runs in a thread (or the main timeline) to stop; only ``asker``'s unless None."""
        return [int(r["id"]) for r in await self._all("request_cancel", place, thread, asker)]

    async def request_cancel_by_event(self, event_id: str, asker: str | None, place: str) -> list[int]:
        """Ask the run that line (or progress line) ``event_id`` belongs to to stop."""
        return [int(r["id"]) for r in await self._all("request_cancel_by_event", event_id, asker, place)]

    async def cancel_in_room(self, place: str) -> list[int]:
        """Every unfinished run in a room: queued ones end now, running ones at their next fenced write."""
        return [int(r["id"]) for r in await self._all("cancel_room_runs", place)]

    async def cancel_one_in_room(self, run_id: int, place: str) -> bool:
        return await self._value("cancel_room_run", run_id, place) is not None

    async def unfinished_in_room(self, place: str) -> list[int]:
        return [int(r["id"]) for r in await self._all("unfinished_room_runs", place)]

    # --- read back -----------------------------------------------------------------------------------

    async def latest_in_room(self, place: str, limit: int) -> list[RunSummary]:
        return rows(RunSummary, await self._all("room_runs", place, limit))

    async def spend_in_room(self, place: str) -> list[BotSpend]:
        return rows(BotSpend, await self._all("room_spend", place))

    async def inspect(self, run_id: int | None, place: str | None, bot: str | None, limit: int) -> list[InspectedRun]:
        return rows(InspectedRun, await self._all("inspect_runs", run_id, place, bot, limit))

    async def inspect_steps(self, run_id: int) -> list[InspectedStep]:
        return rows(InspectedStep, await self._all("inspect_steps", run_id))
