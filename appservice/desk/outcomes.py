"""The desk's outcome figures, from what was recorded of each conversation alone (``desk_outcomes``, migration
0078) and ``now``. Pure: plain data in and out, no I/O, so every definition is a test (docs/desk.md, "Outcome
figures", says them in words).

A report is over the conversations that **started** in a window, with everything that happened to them since —
so a resolution undone after the window still stops counting, and a window's figures only get worse with time,
never better. For each conversation:

- **its bot**: the first bot that answered it, else the one that had it from the start (none: people's alone);
- **handled by a bot alone**: a bot answered, and no person ever had it (no handoff, no person's answer);
- **handed to people**: it left a bot for people at least once — counted once, by its first handoff's cause
  (``contact``, ``bot``, ``said``, ``failure``, ``staff``);
- **resolved** — by its *last* resolution, and only while no reopening came after it: ``confirmed`` or ``assumed``
  when no person had had it before that resolution (a bot's resolution), else **by people**. A handoff after a
  failure, then a resolution, is people's;
- **reopened**: the contact wrote again after a resolution (at any time since);
- **durable**: its *first* resolution held ``durable_days`` (nobody wrote again within that many days of it);
  judged only once that many days have passed — the rest are not counted either way (``durable_judged`` says how
  many were);
- **time to first answer**: from its start to the first answer the contact read (a bot's or a person's);
  **time to a person**: from its first handoff to the first person's answer after it;
- **rating**: its one rating, 1-5.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

HANDOFF_CAUSES = ("contact", "bot", "said", "failure", "staff")
BOT_RESOLUTIONS = ("confirmed", "assumed")
DURABLE_DAYS = 7.0
PEOPLE = "(people)"  # the bot column of conversations no bot answered or had


@dataclass(frozen=True, slots=True)
class Happened:
    """One recorded thing (``desk_outcomes``' row, as the figures read it)."""

    conversation_id: int
    inbox_id: int
    kind: str
    at: datetime
    cause: str | None = None
    bot: str | None = None
    value: int | None = None


@dataclass(frozen=True, slots=True)
class Spread:
    """Seconds, over the conversations that have the figure."""

    count: int
    p50: float
    p90: float

    def json(self) -> dict[str, Any]:
        return {"count": self.count, "p50_seconds": round(self.p50, 3), "p90_seconds": round(self.p90, 3)}


@dataclass(frozen=True)
class Verdict:
    """One conversation, judged."""

    conversation_id: int
    inbox_id: int
    bot: str | None
    bot_answered: bool
    people_had_it: bool
    handed: str | None  # the first handoff's cause
    resolved: str | None  # confirmed | assumed | people: its last resolution, when nothing reopened it since
    reopened: bool
    durable: bool | None  # None: not judged yet (its first resolution is younger than the days), or never resolved
    first_answer: float | None
    to_person: float | None
    rating: int | None

    @property
    def bot_alone(self) -> bool:
        return self.bot_answered and not self.people_had_it


def judge(events: Sequence[Happened], *, now: datetime, durable_days: float = DURABLE_DAYS) -> Verdict:
    """One conversation's recorded events (in the order they happened), judged at ``now``."""
    if not events:
        raise ValueError("a conversation with nothing recorded")
    started = next((e for e in events if e.kind == "started"), events[0])
    answered_by = next((e.bot for e in events if e.kind == "bot_answered"), None)
    people_had_it = False
    handed: str | None = None
    handed_at: datetime | None = None
    to_person: float | None = None
    first_answer: float | None = None
    last_resolution: tuple[str, bool] | None = None  # (cause, whether people had it before it)
    first_resolved: datetime | None = None
    reopened_at: list[datetime] = []
    rating: int | None = None
    for e in events:
        if e.kind in ("bot_answered", "person_answered") and first_answer is None:
            first_answer = (e.at - started.at).total_seconds()
        if e.kind == "handed":
            if handed is None:
                handed, handed_at = e.cause, e.at
            people_had_it = True
        elif e.kind == "person_answered":
            if handed_at is not None and to_person is None:
                to_person = (e.at - handed_at).total_seconds()
            people_had_it = True
        elif e.kind == "resolved":
            last_resolution = (e.cause or "staff", people_had_it)
            first_resolved = first_resolved or e.at
        elif e.kind == "reopened":
            reopened_at.append(e.at)
            last_resolution = None
        elif e.kind == "rated" and rating is None:
            rating = e.value
    resolved: str | None = None
    if last_resolution is not None:
        cause, people_before = last_resolution
        resolved = cause if cause in BOT_RESOLUTIONS and not people_before else "people"
    durable: bool | None = None
    if first_resolved is not None and now - first_resolved >= timedelta(days=durable_days):
        held_until = first_resolved + timedelta(days=durable_days)
        durable = not any(first_resolved < at <= held_until for at in reopened_at)
    return Verdict(
        conversation_id=started.conversation_id, inbox_id=started.inbox_id,
        bot=answered_by or started.bot, bot_answered=answered_by is not None, people_had_it=people_had_it,
        handed=handed, resolved=resolved, reopened=bool(reopened_at), durable=durable,
        first_answer=first_answer, to_person=to_person, rating=rating,
    )


def _spread(values: Iterable[float | None]) -> Spread | None:
    seen = sorted(v for v in values if v is not None)
    if not seen:
        return None

    def rank(q: float) -> float:  # the nearest rank: a wait somebody actually had
        return seen[max(0, math.ceil(q * len(seen)) - 1)]

    return Spread(len(seen), rank(0.5), rank(0.9))


@dataclass(frozen=True)
class Figures:
    conversations: int = 0
    bot_alone: int = 0
    handed: int = 0
    handed_by: Mapping[str, int] = field(default_factory=lambda: MappingProxyType(dict.fromkeys(HANDOFF_CAUSES, 0)))
    confirmed: int = 0
    assumed: int = 0
    resolved_by_people: int = 0
    reopened: int = 0
    durable: int = 0
    durable_judged: int = 0
    first_answer: Spread | None = None
    to_person: Spread | None = None
    ratings: int = 0
    rating_mean: float | None = None
    rating_counts: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)

    def json(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations, "bot_alone": self.bot_alone,
            "handed": self.handed, "handed_by": dict(self.handed_by),
            "resolved": {"confirmed": self.confirmed, "assumed": self.assumed, "by_people": self.resolved_by_people},
            "reopened": self.reopened,
            "durable": {"durable": self.durable, "judged": self.durable_judged},
            "time_to_first_answer": self.first_answer.json() if self.first_answer else None,
            "time_to_a_person": self.to_person.json() if self.to_person else None,
            "rating": {"count": self.ratings,
                       "mean": None if self.rating_mean is None else round(self.rating_mean, 2),
                       "by_stars": dict(zip(("1", "2", "3", "4", "5"), self.rating_counts, strict=True))},
        }


def figures(verdicts: Sequence[Verdict]) -> Figures:
    """The figures of a set of judged conversations."""
    rated = [v.rating for v in verdicts if v.rating is not None]
    counts = [0, 0, 0, 0, 0]
    for r in rated:
        counts[r - 1] += 1
    return Figures(
        conversations=len(verdicts),
        bot_alone=sum(v.bot_alone for v in verdicts),
        handed=sum(v.handed is not None for v in verdicts),
        handed_by=MappingProxyType({cause: sum(v.handed == cause for v in verdicts) for cause in HANDOFF_CAUSES}),
        confirmed=sum(v.resolved == "confirmed" for v in verdicts),
        assumed=sum(v.resolved == "assumed" for v in verdicts),
        resolved_by_people=sum(v.resolved == "people" for v in verdicts),
        reopened=sum(v.reopened for v in verdicts),
        durable=sum(v.durable is True for v in verdicts),
        durable_judged=sum(v.durable is not None for v in verdicts),
        first_answer=_spread(v.first_answer for v in verdicts),
        to_person=_spread(v.to_person for v in verdicts),
        ratings=len(rated),
        rating_mean=sum(rated) / len(rated) if rated else None,
        rating_counts=(counts[0], counts[1], counts[2], counts[3], counts[4]),
    )


@dataclass(frozen=True)
class Report:
    """Per inbox, and per inbox and bot (``PEOPLE`` for the conversations no bot answered or had)."""

    since: datetime
    until: datetime
    durable_days: float
    inboxes: Mapping[int, Figures]
    bots: Mapping[tuple[int, str], Figures]
    cut_at: int | None = None  # more conversations started than a report reads: it read the first this many


def report(events: Sequence[Happened], *, inboxes: Iterable[int], since: datetime, until: datetime, now: datetime,
           durable_days: float = DURABLE_DAYS, cut_at: int | None = None) -> Report:
    """The figures of every conversation in ``events`` (each conversation's together, in the order they happened)."""
    by_conversation: dict[int, list[Happened]] = {}
    for e in events:
        by_conversation.setdefault(e.conversation_id, []).append(e)
    verdicts = [judge(story, now=now, durable_days=durable_days) for story in by_conversation.values()]
    per_inbox = {inbox: figures([v for v in verdicts if v.inbox_id == inbox]) for inbox in inboxes}
    keys = sorted({(v.inbox_id, v.bot or PEOPLE) for v in verdicts})
    per_bot = {key: figures([v for v in verdicts if (v.inbox_id, v.bot or PEOPLE) == key]) for key in keys}
    return Report(since, until, durable_days, MappingProxyType(per_inbox), MappingProxyType(per_bot), cut_at)
