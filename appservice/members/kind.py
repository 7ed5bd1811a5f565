"""What member bots bring to content (``engine.content.kinds``): the ``card`` built-in (an edition's card, offered
only on this surface; its runtime is ``appservice.members.tools``) and the words of ``### members``."""

from __future__ import annotations

from engine.content.kinds import Kind
from engine.core.messages import ToolSpec

CARD = ToolSpec(
        "card",
        "Compose this edition's card (one per run): a heading and blocks, each with a type — text {text}, item "
        "{title, text?, link?}, list {items, ordered?}, kv {pairs: [{key, value}]}, divider, links {links: "
        "[{label, url}]}, or section {title, blocks} (one level). Links are https only. Then write the text.",
        {"type": "object", "properties": {"card": {"type": "object", "properties": {
            "heading": {"type": "string"}, "blocks": {"type": "array", "items": {"type": "object"}}},
            "required": ["heading", "blocks"]}}, "required": ["card"]},
    )

MEMBERS = Kind(
    "members",
    tools=(CARD,),
    strings={
        # Member bots (docs/member-bots.md), in their own rooms: the one notice of an outage ({name}: the glyph and
        # persona, {why}: what failed, {when}: its schedule), and the line a removed bot leaves.
        # A member bot's failed edition (``outage``: the first of an outage, said once), its removal, and why an
        # edition the summons refused was skipped: no provider can answer (``no_provider``), or another refusal.
        "members": {"outage": ("name", "why", "when"), "removed": ("name",), "no_provider": (), "refused": ("reason",),
                    # The reason on the leave event of a room made for a bot that could not then be stored.
                    "not_made": ()},
    },
)
