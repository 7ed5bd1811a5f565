"""An answer the homeserver would not take (SPEC §1, "Delivery"): a run whose answer or ending was refused for
good, or given up on after a day of retries, says so on the run — a step of its own with the homeserver's
reason, which ``summon runs`` shows as "not delivered" — is counted on ``/metrics``, and the room is told once,
by the service's own user (which may still reach a room its bot's puppet cannot): nothing answered disappears
without a word."""

from __future__ import annotations

import logging
from collections.abc import Callable

from appservice.matrix.delivery.render import answer_content
from appservice.matrix.tables.outbox import OutboxTables, Outgoing
from appservice.metrics import Metrics
from engine.content import Registry
from engine.core.redact import redact
from engine.store import Tx

log = logging.getLogger(__name__)

SECTION = "delivery"


def told_txn(run_id: int) -> str:
    return f"summon.run{run_id}.undelivered"


def is_outcome(row: Outgoing, speak_key: str) -> bool:
    """Whether ``row`` is a run's answer or ending itself — not a progress line, a keycap, an edit or the spoken
    copy of an answer (which falls back to its text on purpose)."""
    return (row.run_id is not None and row.of_txn is None and row.event_type == "m.room.message"
            and not row.txn_id.endswith(".progress") and speak_key not in row.content)


class Undelivered:
    def __init__(self, registry: Callable[[], Registry], *, service_user: str, metrics: Metrics | None = None) -> None:
        self._registry = registry
        self.service_user = service_user
        self.metrics = metrics

    async def __call__(self, tx: Tx, row: Outgoing, why: str) -> None:
        assert row.run_id is not None
        if not await tx.of(OutboxTables).undelivered(row.run_id, why):
            return
        registry = self._registry()
        bot = next((b for b in registry.bots.values() if b.user_id == row.sender), None)
        name = bot.name if bot is not None else row.sender
        log.error("run %s: its answer could not be delivered: %s", row.run_id, why,
                  extra={"run": row.run_id, "room": row.room_id, "bot": bot.slug if bot else None})
        if self.metrics is not None:
            self.metrics.undelivered(bot.slug if bot is not None else "")
        words = registry.strings.get(SECTION, "undelivered")
        if not words or row.sender == self.service_user:
            return  # no words, or it was the service's own line: nobody else to say it
        # Where the answer would have gone: in its thread, replying to the asking line, mentioning the asker.
        relates = row.content.get("m.relates_to")
        relates = relates if isinstance(relates, dict) else {}
        replied = relates.get("m.in_reply_to")
        mentioned = (row.content.get("m.mentions") or {}).get("user_ids") or [None]
        content = answer_content(words.format(bot=name, reason=redact(why)[:300]),
                                 thread_root=relates.get("event_id") if relates.get("rel_type") == "m.thread" else None,
                                 reply_to=replied.get("event_id") if isinstance(replied, dict) else None,
                                 mention=mentioned[0] if isinstance(mentioned[0], str) else None)
        await tx.of(OutboxTables).enqueue(txn_id=told_txn(row.run_id), room_id=row.room_id, sender=self.service_user,
                                event_type="m.room.message", content=content)
