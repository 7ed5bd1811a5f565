"""The desk's outcome figures on /metrics (docs/desk.md, "Outcome figures"): the conversations started in the last
30 days and everything since, by inbox and bot (bot ``*``: the inbox as a whole), judged at most once a minute —
a scrape in between reuses them. Registered with the process's ``Metrics`` by the desk's builder."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from prometheus_client import CollectorRegistry, Gauge

from appservice.desk.outcomes import BOT_RESOLUTIONS, HANDOFF_CAUSES, Figures, Report
from engine.errors import StoreError

log = logging.getLogger(__name__)

EVERY_SECONDS = 60.0
ALL_BOTS = "*"

# What reads the outcome report, with its inboxes' names.
Reader = Callable[[], Awaitable[tuple[Report, Mapping[int, str]]]]


class DeskGauges:
    def __init__(self, registry: CollectorRegistry, read: Reader) -> None:
        self._read = read
        self._read_at: float | None = None
        r, labels = registry, ["inbox", "bot"]
        self.conversations = Gauge("summon_desk_conversations", "Desk conversations started in the window.",
                                   labels, registry=r)
        self.bot_alone = Gauge("summon_desk_bot_alone", "Of them, answered by a bot and never had by people.",
                               labels, registry=r)
        self.handed = Gauge("summon_desk_handed", "Of them, handed to people, by the first handoff's cause "
                            "(contact, bot, said, failure, staff).", [*labels, "cause"], registry=r)
        self.resolved = Gauge("summon_desk_resolved", "Of them, resolved and not reopened since, by how "
                              "(confirmed, assumed: a bot's; people).", [*labels, "how"], registry=r)
        self.reopened = Gauge("summon_desk_reopened", "Of them, written in again after a resolution.", labels,
                              registry=r)
        self.durable = Gauge("summon_desk_durable", "Of them, first resolutions that held the durable days.", labels,
                             registry=r)
        self.durable_judged = Gauge("summon_desk_durable_judged", "Of them, first resolutions old enough to be "
                                    "judged durable or not.", labels, registry=r)
        self.first_answer = Gauge("summon_desk_first_answer_seconds", "Time to the first answer, by quantile.",
                                  [*labels, "quantile"], registry=r)
        self.to_person = Gauge("summon_desk_to_a_person_seconds", "From the first handoff to a person's answer, by "
                               "quantile.", [*labels, "quantile"], registry=r)
        self.ratings = Gauge("summon_desk_ratings", "Ratings given.", labels, registry=r)
        self.rating_mean = Gauge("summon_desk_rating_mean", "Their mean, 1-5 (absent: none given).", labels,
                                 registry=r)

    async def read(self) -> None:
        if self._read_at is not None and time.monotonic() - self._read_at < EVERY_SECONDS:
            return
        try:
            made, names = await self._read()
        except StoreError as exc:
            log.warning("metrics: could not read the desk's outcomes: %s", exc)
            return
        self._read_at = time.monotonic()
        for gauge in (self.conversations, self.bot_alone, self.handed, self.resolved, self.reopened, self.durable,
                      self.durable_judged, self.first_answer, self.to_person, self.ratings, self.rating_mean):
            gauge.clear()  # a bot gone from the window leaves no stale figure behind
        for inbox, f in made.inboxes.items():
            self._set(names.get(inbox, str(inbox)), ALL_BOTS, f)
        for (inbox, bot), f in made.bots.items():
            self._set(names.get(inbox, str(inbox)), bot, f)

    def _set(self, inbox: str, bot: str, f: Figures) -> None:
        self.conversations.labels(inbox, bot).set(f.conversations)
        self.bot_alone.labels(inbox, bot).set(f.bot_alone)
        for cause in HANDOFF_CAUSES:
            self.handed.labels(inbox, bot, cause).set(f.handed_by[cause])
        for how, count in zip((*BOT_RESOLUTIONS, "people"), (f.confirmed, f.assumed, f.resolved_by_people),
                              strict=True):
            self.resolved.labels(inbox, bot, how).set(count)
        self.reopened.labels(inbox, bot).set(f.reopened)
        self.durable.labels(inbox, bot).set(f.durable)
        self.durable_judged.labels(inbox, bot).set(f.durable_judged)
        for gauge, spread in ((self.first_answer, f.first_answer), (self.to_person, f.to_person)):
            if spread is not None:
                gauge.labels(inbox, bot, "0.5").set(spread.p50)
                gauge.labels(inbox, bot, "0.9").set(spread.p90)
        self.ratings.labels(inbox, bot).set(f.ratings)
        if f.rating_mean is not None:
            self.rating_mean.labels(inbox, bot).set(f.rating_mean)
