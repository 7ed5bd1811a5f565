"""The desk's outcome report: read from ``desk_outcomes`` (through the store), judged by ``outcomes`` (pure), and
said as JSON (the staff API, the staff page) or as a table (``summon desk report``). Who may read it is the staff
key's to say: the inboxes a key reaches, as in the staff API."""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from appservice.desk.outcomes import DURABLE_DAYS, HANDOFF_CAUSES, Figures, Happened, Report, Spread, report
from appservice.desk.tables import DeskTables
from engine.store import Families

MOST = 50_000  # conversations one report reads (the earliest that started in the window); more is said
DEFAULT_DAYS = 30.0
_SPAN = re.compile(r"([0-9]{1,4}(?:\.[0-9]{1,3})?)\s*([hdw])")
_UNIT = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


class BadWindow(ValueError):
    """A window that cannot be read (said to whoever asked)."""


def reached(key: str, keys: Mapping[int, str]) -> list[int]:
    """The inboxes (by id) whose staff key ``key`` is, every key compared in constant time."""
    given = key.encode()
    return sorted(inbox for inbox, staff_key in keys.items() if hmac.compare_digest(given, staff_key.encode()))


def moment(text: str | None, *, now: datetime, default: datetime) -> datetime:
    """``7d`` / ``12h`` / ``2w`` before ``now``, an ISO date or moment (UTC unless it says), or ``default``."""
    if text is None or not text.strip():
        return default
    text = text.strip()
    span = _SPAN.fullmatch(text)
    if span:
        return now - float(span.group(1)) * _UNIT[span.group(2)]
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise BadWindow(f"{text!r} is not a moment: say 7d, 12h, 2w, or a date such as 2026-11-01") from None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


async def outcome_report(db: Families, inboxes: list[int], *, since: datetime, until: datetime, now: datetime,
                         durable_days: float = DURABLE_DAYS, most: int = MOST) -> Report:
    if until <= since:
        raise BadWindow("the window ends before it starts")
    if not 0 < durable_days <= 365:
        raise BadWindow("durable days are between 0 and 365")
    found = await db.of(DeskTables).outcomes_of_window(inboxes, since, until, most + 1)
    conversations = list(dict.fromkeys(r.conversation_id for r in found))
    cut = None
    if len(conversations) > most:
        kept = set(conversations[:most])
        found = [r for r in found if r.conversation_id in kept]
        cut = most
    events = [Happened(r.conversation_id, r.inbox_id, r.kind, r.at, cause=r.cause, bot=r.bot, value=r.value)
              for r in found]
    return report(events, inboxes=inboxes, since=since, until=until, now=now, durable_days=durable_days, cut_at=cut)


def report_json(made: Report, names: Mapping[int, str]) -> dict[str, Any]:
    return {
        "since": made.since.isoformat(), "until": made.until.isoformat(), "durable_days": made.durable_days,
        **({"cut_at": made.cut_at} if made.cut_at is not None else {}),
        "inboxes": [{"inbox": names.get(inbox, str(inbox)), **figures.json()} for inbox, figures in made.inboxes.items()],
        "bots": [{"inbox": names.get(inbox, str(inbox)), "bot": bot, **figures.json()}
                 for (inbox, bot), figures in made.bots.items()],
    }


def _share(part: int, whole: int) -> str:
    return f"{part}" if not whole else f"{part} ({100 * part / whole:.0f}%)"


def _spread(s: Spread | None) -> str:
    return "-" if s is None else f"{_seconds(s.p50)} / {_seconds(s.p90)}"


def _seconds(value: float) -> str:
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.1f} h"


COLUMNS = ("", "conversations", "bot alone", "handed (contact/bot/said/failure/staff)", "confirmed", "assumed",
           "by people", "reopened", "durable", "first answer p50/p90", "to a person p50/p90", "rating")


def _row(label: str, f: Figures) -> list[str]:
    n = f.conversations
    handed = "/".join(str(f.handed_by[c]) for c in HANDOFF_CAUSES)
    rating = "-" if f.rating_mean is None else f"{f.rating_mean:.1f} of {f.ratings}"
    return [label, str(n), _share(f.bot_alone, n), f"{_share(f.handed, n)}: {handed}", _share(f.confirmed, n),
            _share(f.assumed, n), _share(f.resolved_by_people, n), _share(f.reopened, n),
            f"{f.durable} of {f.durable_judged}", _spread(f.first_answer), _spread(f.to_person), rating]


def report_table(made: Report, names: Mapping[int, str]) -> str:
    """The report as a terminal table: a row per inbox, then one per bot in it."""
    lines: list[tuple[str, ...]] = [COLUMNS]
    for inbox, figures in made.inboxes.items():
        name = names.get(inbox, str(inbox))
        lines.append(tuple(_row(name, figures)))
        for (of, bot), by_bot in made.bots.items():
            if of == inbox:
                lines.append(tuple(_row(f"  {bot}", by_bot)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    out = [f"conversations started {made.since:%Y-%m-%d %H:%M} – {made.until:%Y-%m-%d %H:%M} UTC, and everything "
           f"since; durable: the first resolution held {made.durable_days:g} days (judged once that old)"]
    if made.cut_at is not None:
        out.append(f"more conversations started than a report reads: the first {made.cut_at} are counted")
    for line in lines:
        out.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    return "\n".join(out)
