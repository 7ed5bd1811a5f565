"""What the social surface brings to content (``engine.content.kinds``): a bot that lists ``social`` in its
``surfaces:`` may be named by a rule in a bridged room (SPEC §14) — and keeps no memory of a person, for a guest
has none here — and the words of ``### social``. It brings no
tool and no key: the model cannot name an account, a recipient or a destination, because nothing it is offered
takes one — where a reply goes is the rule's, fixed when the rule was written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.content.kinds import Kind, Refuse
from engine.core.memory import uses_person

NAME = "social"


def _no_memory_of_guests(values: Mapping[str, Any], refuse: Refuse) -> None:
    """A guest (a bridge puppet) is nobody of ours: a bot that answers them keeps no memory of a person."""
    if NAME in values["surfaces"] and uses_person(values["memory"]):
        refuse(("memory", "surfaces"), f"memory: {values['memory']} remembers a person, but a bot on the social "
               "surface answers guests (bridge puppets), of whom nothing is remembered: use memory: thread")

SOCIAL = Kind(
    NAME,
    rules=(_no_memory_of_guests,),
    strings={
        # What staff read: the usage and refusals of !rules (``bad`` as !bots says it), the room's bridge, each
        # rule's line (its state, how it sends, what it matches, its bot and where the reply goes, with the label
        # that says who sees it), the history of a rule, the review place's threads and drafts, and what became of
        # each draft. ``public``/``private``: the labels beside every rule, draft and delivery.
        "social": {
            "usage": ("commands",), "not_staff": ("level", "yours"), "bad": ("field", "value", "allowed", "why"),
            "not_bridged": (), "bridged": ("network", "conversation", "bridge", "known_by"),
            "conversation_dm": (), "conversation_comments": (), "conversation_group": (),
            "public": ("network",), "private": (),
            "drafts": (), "auto": (), "active": (), "paused": ("why",),
            "rules": (), "no_rules": (),
            "rule_line": ("id", "state", "mode", "phrase", "kind", "bot", "label", "author"),
            "added": ("id",), "paused_now": ("id",), "resumed": ("id",), "removed": ("id",),
            "auto_on": ("id", "label"), "auto_off": ("id",), "not_a_rule": ("id", "allowed"),
            "history": ("id",), "no_history": ("id",), "history_line": ("when", "what", "by", "why", "run"),
            "thread": ("network", "conversation", "channel"),
            "draft": ("bot", "id", "phrase", "label"),
            "sent": ("name", "label"), "edited": ("name", "label"), "discarded": ("name",),
            "auto_sent": ("label",), "held": ("id", "why"), "ended": ("bot",),
            "not_sent": ("who",), "why_author": ("who",), "why_unpublished": ("bot",), "why_unbridged": (),
        },
    },
)
