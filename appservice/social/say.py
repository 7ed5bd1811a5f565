"""The site's words for ``### social`` (``appservice.social.kind``); with none for a key, that part says nothing —
never words of the code's own. The labels beside every rule, draft and delivery are said here, once."""

from __future__ import annotations

from typing import Any

from appservice.social.kind import NAME
from appservice.social.tables import Bridged
from engine.content.strings import Strings


class Say:
    def __init__(self, strings: Strings) -> None:
        self._strings = strings

    def __call__(self, key: str, **values: Any) -> str:
        text = self._strings.get(NAME, key)
        return text.format(**values).strip() if text else ""

    @staticmethod
    def lines(*parts: str) -> str:
        return "\n\n".join(part for part in parts if part.strip())

    def label(self, destination: str, room: Bridged | None) -> str:
        """Who sees a reply that goes to ``destination``: everyone on the network, or the person alone."""
        if destination == "public":
            return self("public", network=room.network if room is not None else "")
        return self("private")

    def conversation(self, room: Bridged) -> str:
        return self(f"conversation_{room.conversation}")
