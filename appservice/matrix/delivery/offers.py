"""A bot's choices as Matrix shows them (SPEC §4). Pure: the text and event contents of an offer, of its
keycaps or poll, and of the marks a spent set gets. ``engine.core.choices.cut`` decided what the choices are.

The answer reads the same however the room presses: the words, then the choices numbered from 1 (so
the asker can answer with the bare number) and the links. Under it the puppet adds one keycap per
choice, or — in a room whose settings choose polls — an MSC3381 poll (the unstable types, which is
what clients send today; votes are read under both prefixes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.choices import Choice, Link

KEYCAPS = tuple(f"{n}\N{VARIATION SELECTOR-16}\N{COMBINING ENCLOSING KEYCAP}" for n in range(1, 7))
POLL_START = "org.matrix.msc3381.poll.start"
POLL_END = "org.matrix.msc3381.poll.end"
POLL_KIND = "org.matrix.msc3381.poll.disclosed"
TEXT = "org.matrix.msc1767.text"
MAX_QUESTION = 200
STYLES = ("reactions", "poll")


def answer_txn(run_id: int) -> str:
    return f"summon.run{run_id}.answer"


def keycap_txn(run_id: int, n: int) -> str:
    return f"summon.run{run_id}.key{n}"


def poll_txn(run_id: int) -> str:
    return f"summon.run{run_id}.poll"


def style_of(settings: Mapping[str, Any] | None) -> str:
    """How a room presses: keycap reactions unless its settings choose polls."""
    return "poll" if (settings or {}).get("choices") == "poll" else "reactions"


def keycap_number(key: object) -> int | None:
    """The choice a keycap presses (1…6), with or without the variation selector; None for any other key."""
    if not isinstance(key, str):
        return None
    bare = key.replace("\N{VARIATION SELECTOR-16}", "")
    if len(bare) == 2 and bare[1] == "\N{COMBINING ENCLOSING KEYCAP}" and bare[0] in "123456":
        return int(bare[0])
    return None


def bare_number(text: str) -> int | None:
    """A line that is only a choice's number ("2", "2."), or None."""
    said = text.strip().removesuffix(".").strip()
    return int(said) if len(said) == 1 and said in "123456" else None


def offer_markdown(words: str, choices: Sequence[Choice], links: Sequence[Link]) -> str:
    """The answer as offered: the words, the numbered choices (a choice's detail under it), the links."""
    parts = [words.strip(), "\n".join(_option(n, c) for n, c in enumerate(choices, 1))]
    if links:
        parts.append("\n".join(f"- [{link.label}]({link.url})" for link in links))
    return "\n\n".join(parts)


def spent_markdown(words: str, choices: Sequence[Choice], links: Sequence[Link], taken: int, mark: str) -> str:
    """The answer once its choices are spent: the one taken marked (``mark``), the others struck through."""
    lines = [mark if n == taken else f"~~{n}. {c.label}~~" for n, c in enumerate(choices, 1)]
    parts = [words.strip(), "  \n".join(lines)]
    if links:
        parts.append("\n".join(f"- [{link.label}]({link.url})" for link in links))
    return "\n\n".join(parts)


def _option(n: int, choice: Choice) -> str:
    detail = "".join(f"\n   - {line}" for line in choice.detail.split("\n") if line.strip())
    return f"{n}. {choice.label}{detail}"


def keycap_content(n: int) -> dict[str, Any]:
    """The puppet's keycap for choice ``n``; the outbox fills in the answer's event id (``of_txn``)."""
    return {"m.relates_to": {"rel_type": "m.annotation", "key": KEYCAPS[n - 1]}}


def poll_question(words: str) -> str:
    """What the poll asks: the line the choices sit under (the words' last line)."""
    last = next((line for line in reversed(words.strip().split("\n")) if line.strip()), "")
    question = last.strip().lstrip("#>").strip()
    return question if len(question) <= MAX_QUESTION else question[: MAX_QUESTION - 1].rstrip() + "…"


def poll_start_content(question: str, choices: Sequence[Choice], *, thread_root: str | None) -> dict[str, Any]:
    """An MSC3381 poll of the choices, answer ids "1"…"6", with its text fallbacks for clients that
    show no polls (the extensible-events text and a plain ``body``)."""
    fallback = "\n".join([question, *(f"{n}. {c.label}" for n, c in enumerate(choices, 1))])
    content: dict[str, Any] = {
        POLL_START: {
            "kind": POLL_KIND,
            "max_selections": 1,
            "question": {TEXT: question, "body": question, "msgtype": "m.text"},
            "answers": [{"id": str(n), TEXT: c.label} for n, c in enumerate(choices, 1)],
        },
        TEXT: fallback,
        "body": fallback,
    }
    if thread_root:
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread_root}
    return content


def poll_end_content(text: str) -> dict[str, Any]:
    """The poll ended; the outbox fills in the poll's event id (``of_txn``)."""
    return {"m.relates_to": {"rel_type": "m.reference"}, POLL_END: {}, TEXT: text, "body": text}


def voted(content: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """A vote's poll event id and the answer ids chosen, read under either prefix; None if malformed."""
    rel = content.get("m.relates_to")
    if not isinstance(rel, Mapping) or rel.get("rel_type") != "m.reference":
        return None
    poll = rel.get("event_id")
    if not isinstance(poll, str):
        return None
    unstable = content.get("org.matrix.msc3381.poll.response")
    answers = unstable.get("answers") if isinstance(unstable, Mapping) else content.get("m.selections")
    if not isinstance(answers, list):
        return None
    return poll, [a for a in answers if isinstance(a, str)]
