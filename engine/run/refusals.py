"""What a refused summons is told, in one place for every surface: the reasons a summons is refused, the refusal
itself, the ones a person is told of wherever they asked, and the words for it (``refusal_words``), from the
site's ``### refusals``. Pure: no I/O, no clock (the time a ceiling frees up is carried in the refusal)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from typing import Literal

from engine.content.strings import Strings
from engine.core.limits import Breach

Refusal = Literal["not_published", "not_on_surface", "audience", "encrypted", "duplicate", "ceiling",
                  "no_provider", "busy", "not_enabled", "quiet", "too_many", "budget", "queue_full"]


@dataclass(frozen=True)
class Refused:
    reason: Refusal
    breach: Breach | None = None  # for "ceiling" and "budget": which window, and when it frees up
    live: int | None = None  # for "too_many": how many runs the person has waiting or running
    waiting: int | None = None  # for "queue_full": how many summonses wait for the bot


# The refusals a person is told of wherever they asked (they can act on them: wait, or ask less at once); the
# others (not offered, not enabled here, encrypted…) are the surface's to answer as it answers an unknown thing.
TOLD: frozenset[str] = frozenset({"ceiling", "too_many", "budget", "queue_full"})


def refusal_words(refused: Refused, strings: Strings, bot: str) -> str | None:
    """What a refused summons is told, in the site's words (``### refusals``), on every surface alike — or None
    when the site has none for it (then nothing is said). A ceiling or the day's cap says when it frees up; too
    many live runs how many; a full waiting line how many wait."""
    words = strings.get("refusals", refused.reason)
    if not words:
        return None
    over = refused.breach
    if refused.reason in ("ceiling", "budget") and (over is None or over.frees_at is None):
        return None
    when = over.frees_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if over and over.frees_at else ""
    return words.format(bot=bot, live=refused.live, waiting=refused.waiting, window=over.window if over else "",
                        when=when)
