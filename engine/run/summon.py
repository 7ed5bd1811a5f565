"""The one door in: a surface asks for a run here, and every refusal is made here, before the run exists.

``refusal`` is pure (the rules); ``summon`` applies it and inserts the run in the caller's transaction,
so a line and the run it summoned are stored together or not at all. After the bot's own rules and the
room's, in order: a line joins its asker's live run rather than starting one; nothing starts when nothing
can answer (no provider, no bots); then, with the person's row locked, the bot's per-person ceilings, at
most ``live_runs_per_person`` runs waiting or running per person, and — with the deployment's row locked —
its daily spend cap, then — with the pool's row locked — the daily cap of the pool the run spends from, if
any (a surface's own, one inbox of a support widget say: bounded even when every asker is new). A run
starts in its asker's turn (how many they already have live; a run nobody asked that ``counts_live``, in
its subject's), so the claim serves everyone's first before anyone's second. Every run reserves its own
spend limit until it ends.

``would_refuse`` asks the same gates (all but the join) without inserting anything, for a surface that pays for
something before the summons can be made — a voice note's transcription — with what it is about to pay counted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from engine.content import AudienceFacts, Bot, Registry, admits
from engine.core.limits import Breach, Ceilings, Limits, breach, lowered
from engine.core.room_settings import room_refusal
from engine.run.refusals import Refusal, Refused
from engine.store import Tx

log = logging.getLogger(__name__)


# A worker beats every 10 s; three missed beats and it is taken for gone.
LIVENESS_SECONDS = 30.0


@dataclass(frozen=True)
class Summons:
    bot: str
    surface: str
    prompt: str
    asked_by: str | None
    facts: AudienceFacts
    place: str | None = None
    thread: str | None = None
    trigger_event: str | None = None
    subject: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    encrypted: bool = False
    # The asking line, when a live run of the same person, bot and thread may take it instead of a new
    # run (a second mention while the first is still being worked on).
    later: dict[str, Any] | None = None
    # The most the run may use, when it is asked through something that carries its own ceilings (a door
    # grant): lowers the bot's limits and per-person windows, never raises them.
    ceilings: Ceilings | None = None
    # A summons whose number is bounded by construction — a member bot's edition, one per charter and
    # occurrence — is never turned away by the bot's waiting line (the line's cap turns away people, who can
    # ask again; a refused edition would be lost). It still counts in the line, which is as long as it is.
    bounded: bool = False
    # The pool of spend the run is drawn from, named by the surface (one inbox of it, say), and its own cap in
    # USD over any 24 hours (None: none). Every run from the pool reserves against it, asked or not, so a
    # pool is bounded even when every asker is new and so under no ceiling yet.
    pool: str | None = None
    pool_daily: float | None = None
    # A run nobody asked for that still counts in its subject's live runs and takes its turn in the claim
    # (what a visitor's words wake on a support surface: no more at once than they could ask for).
    counts_live: bool = False


@dataclass(frozen=True)
class Summoned:
    run_id: int
    joined: bool = False  # the line joined a live run's context (``later``) rather than starting one


def refusal(registry: Registry, s: Summons) -> Refusal | None:
    bot = registry.get(s.bot)
    if bot is None:
        return "not_published"
    if s.surface not in bot.surfaces:
        return "not_on_surface"
    if s.encrypted:
        return "encrypted"
    # `for:` says who may ask; a run nobody asked for (a schedule, an event) is gated by who it may run
    # for, `serves:`, against its subject (SPEC §6).
    gate = bot.audience if s.asked_by is not None else bot.serves
    if gate is not None and not admits(gate, s.facts):
        return "audience"
    return None


async def summon(tx: Tx, registry: Registry, s: Summons, *, max_attempts: int = 3) -> Summoned | Refused:
    refused = await _bot_and_room(tx, registry, s)
    if refused is not None:
        return refused
    if s.later is not None and s.asked_by is not None and s.place is not None:
        # The live run's row is taken in this transaction, so a worker finishing it either sees the line
        # (it re-reads the context before each model call) or finished first, and this starts a new run.
        joined = await tx.runs.join_live(bot=s.bot, surface=s.surface, asked_by=s.asked_by, place=s.place,
                                         thread=s.thread, line=s.later,
                                         header=registry.strings.get("context", "later"))
        if joined is not None:
            log.info("the line joined run %s", joined, extra={"bot": s.bot, "room": s.place, "run": joined})
            return Summoned(joined, joined=True)
    cleared = await _caps(tx, registry, s)
    if isinstance(cleared, Refused):
        return cleared
    bot, limits, spender, live = cleared
    run_id = await tx.runs.insert(
        bot=bot.slug, surface=s.surface, place=s.place, thread=s.thread,
        trigger_event=s.trigger_event, asked_by=s.asked_by, subject=s.subject, prompt=s.prompt,
        context=s.context,
        limits={"steps": limits.steps, "spend": limits.spend, "minutes": limits.minutes}, max_attempts=max_attempts, turn=live,
        live_for=_live_key(s) if s.asked_by is None else None,
    )
    if run_id is None:
        return Refused("duplicate")
    # Every run holds its own spend limit until it ends: the person's ceilings and the deployment's cap
    # count it while it works.
    await tx.people.reserve(spender, bot.slug, run_id, limits.spend)
    if s.pool is not None:
        await tx.people.reserve_in_pool(run_id, s.pool)
    log.info("summoned run %s", run_id, extra={"bot": bot.slug, "room": s.place, "run": run_id})
    return Summoned(run_id)


async def would_refuse(tx: Tx, registry: Registry, s: Summons, *, also_reserve: float = 0.0,
                       also_live: int = 0) -> Refused | None:
    """Whether ``summon(s)`` would be refused now, by every gate it makes but joining a live run, with nothing
    inserted: for a surface that must pay for something before it can ask (a voice note is transcribed before
    its words are the question), so nothing is paid for before every gate (SPEC §15). ``also_reserve`` USD more
    must fit the person's ceilings and the deployment's cap beside the run's own limit (what the caller is
    about to pay), and ``also_live`` more count as the asker's live runs (what they have in flight that will
    ask). A refusal is recorded as ``summon``'s are. When it passes, the person's row (and under a daily cap,
    the deployment's) stays locked for the rest of the transaction, so what the caller reserves in it is
    counted before any racing summons is checked."""
    refused = await _bot_and_room(tx, registry, s)
    if refused is not None:
        return refused
    cleared = await _caps(tx, registry, s, also_reserve=also_reserve, also_live=also_live)
    return cleared if isinstance(cleared, Refused) else None


async def _bot_and_room(tx: Tx, registry: Registry, s: Summons) -> Refused | None:
    """The bot's own rules (``refusal``), then the room's say."""
    why = refusal(registry, s)
    if why is not None:
        log.info("summons refused: %s", why, extra={"bot": s.bot, "room": s.place, "asker": s.asked_by})
        return await _refused(tx, s, why)
    if s.place is not None:
        # The room's own say (what its admins set): which bots answer there, and its quiet hours.
        rules = await tx.places.rules(tx, s.place)
        here = room_refusal(rules.settings, s.bot, asked=s.asked_by is not None, now=rules.now) if rules else None
        if here is not None:
            log.info("summons refused: %s", here, extra={"bot": s.bot, "room": s.place, "asker": s.asked_by})
            return await _refused(tx, s, here)
    return None


async def _caps(tx: Tx, registry: Registry, s: Summons, *, also_reserve: float = 0.0,
                also_live: int = 0) -> Refused | tuple[Bot, Limits, str | None, int]:
    """Something to answer, the person's ceilings, their live runs, the bot's waiting line and the daily cap;
    when all hold: the bot, the run's limits, who pays, and how many runs they already have live."""
    if not await tx.workers.provider_usable(LIVENESS_SECONDS):
        # No provider, no bots: nothing would answer, so nothing is started (absent means no).
        log.warning("summons refused: no worker can answer model calls", extra={"bot": s.bot, "room": s.place})
        return await _refused(tx, s, "no_provider")
    bot = registry.get(s.bot)
    assert bot is not None
    limits, per = lowered(Limits(steps=bot.limits.steps, spend=bot.limits.spend, minutes=bot.limits.minutes),
                          bot.limits.per or {}, s.ceilings)
    reserve = limits.spend + also_reserve
    caps = await tx.people.caps()
    # The asker pays; a run nobody asked for is counted against its subject (it matters more there).
    spender = s.asked_by or s.subject
    if spender is not None:
        # Everything below is checked before the run exists (a refusal buys nothing), with the person's row
        # locked so two racing summonses are checked one after the other, never against the same snapshot.
        now = await tx.people.lock_spender(spender)
    if per and spender is not None:
        over = breach(per, await tx.people.ledger(spender, bot.slug), reserve, now)
        if over is not None:
            log.info("summons refused: the %s ceiling", over.window, extra={"bot": s.bot, "asker": spender})
            return await _refused(tx, s, "ceiling", over, detail=f"the {over.window} ceiling")
    # The run's turn: how many the asker already has waiting or running (the claim serves lower turns first).
    live_key = _live_key(s)
    live = await tx.runs.live_of(live_key) if live_key is not None else 0
    if live + also_live >= caps.live_runs_per_person:
        log.info("summons refused: %d runs already waiting or running", live + also_live,
                 extra={"bot": s.bot, "room": s.place, "asker": live_key})
        return await _refused(tx, s, "too_many", live=live + also_live, detail=f"{live + also_live} live runs")
    # Backpressure, not collapse: past the configured depth, a new summons is refused in words rather than
    # queued behind the others for minutes. (Counted without a lock: racing summonses may pass it by a few.)
    waiting = 0 if s.bounded else await tx.runs.waiting_for(bot.slug)
    if waiting >= caps.waiting_per_bot:
        log.warning("summons refused: %d summonses already wait for %s", waiting, bot.slug,
                    extra={"bot": s.bot, "room": s.place, "asker": s.asked_by})
        return await _refused(tx, s, "queue_full", waiting=waiting, detail=f"{waiting} waiting for the bot")
    if caps.daily_spend is not None:
        over = await _over_budget(tx, caps.daily_spend, reserve)
        if over is not None:
            log.warning("summons refused: the deployment's daily spend cap (%.2f USD) is reached", caps.daily_spend,
                        extra={"bot": s.bot, "room": s.place, "asker": spender})
            return await _refused(tx, s, "budget", over, detail=f"the daily cap of {caps.daily_spend:g} USD")
    if s.pool is not None and s.pool_daily is not None:
        over = await _over_pool(tx, s.pool, s.pool_daily, reserve)
        if over is not None:
            log.warning("summons refused: %s's daily spend cap (%.2f USD) is reached", s.pool, s.pool_daily,
                        extra={"bot": s.bot, "room": s.place, "asker": spender})
            return await _refused(tx, s, "budget", over, detail=f"{s.pool}'s daily cap of {s.pool_daily:g} USD")
    return bot, limits, spender, live


def _live_key(s: Summons) -> str | None:
    """Whose live runs the summons counts in: its asker's; asked by nobody, its subject's when it counts."""
    return s.asked_by if s.asked_by is not None else s.subject if s.counts_live else None


async def _over_budget(tx: Tx, daily: float, reserve: float) -> Breach | None:
    """Whether ``reserve`` more would take the whole deployment over its daily cap (rolling 24 hours, like a
    person's ``day`` window), and when it frees up. The caps row is locked first, so racing summonses are
    counted one after the other."""
    now = await tx.people.lock_deployment()
    if await tx.people.deployment_spent() + reserve <= daily + 1e-12:
        return None
    over = breach({"day": daily}, await tx.people.deployment_ledger(), reserve, now)
    if over is not None and over.frees_at is None:
        log.error("a run's own spend limit (%.2f USD) is more than the deployment's daily cap (%.2f USD): it can "
                  "never run", reserve, daily)
    return over


async def _over_pool(tx: Tx, pool: str, daily: float, reserve: float) -> Breach | None:
    """Whether ``reserve`` more would take ``pool`` over its own daily cap (rolling 24 hours, as the deployment's),
    and when it frees up; the pool's row locked first, so racing summonses are counted one after the other."""
    now = await tx.people.lock_pool(pool)
    if await tx.people.pool_spent(pool) + reserve <= daily + 1e-12:
        return None
    over = breach({"day": daily}, await tx.people.pool_ledger(pool), reserve, now)
    if over is not None and over.frees_at is None:
        log.error("a run's own spend limit (%.2f USD) is more than %s's daily cap (%.2f USD): it can never run",
                  reserve, pool, daily)
    return over


async def _refused(tx: Tx, s: Summons, why: Refusal, over: Breach | None = None, *,
                   detail: str | None = None, live: int | None = None, waiting: int | None = None) -> Refused:
    """A refusal is a matter of record (``summon runs`` shows it): nothing was bought, nothing started."""
    await tx.refusals.record(bot=s.bot, surface=s.surface, place=s.place, thread=s.thread,
                             trigger_event=s.trigger_event, asked_by=s.asked_by, reason=why, detail=detail)
    return Refused(why, over, live, waiting)
