"""Pathological text for the readers of untrusted input: the issue's own inputs and the worst case of each
construct at a given size. Shared by tests/unit/test_untrusted_text.py (a bound), tests/fuzz (a seed) and
tests/bench/untrusted.py (the figures)."""

from __future__ import annotations

from typing import Any

KIB = 1024


def fill(prefix: str, unit: str, suffix: str = "", size: int = 64 * KIB) -> str:
    """``prefix``, then ``unit`` as many times as fit, then ``suffix``: at most ``size`` UTF-8 bytes."""
    room = size - len((prefix + suffix).encode())
    return prefix + unit * (room // len(unit.encode())) + suffix


def message(body: str, html: str | None, *, sender: str = "@alice:localhost") -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": "m.text", "body": body}
    if html is not None:
        content |= {"format": "org.matrix.custom.html", "formatted_body": html}
    return {"type": "m.room.message", "event_id": "$pathological", "room_id": "!room:localhost",
            "sender": sender, "origin_server_ts": 1_700_000_000_000, "content": content}


ISSUE_INPUTS = [
    ("pre_32000_spaces", "<pre>x" + " " * 32_000 + "x</pre>"),
    ("pre_62kb_spaces", "<pre>x" + " " * 62_000 + "x</pre>"),
    ("unterminated_a_120000", "<a" * 120_000),
]


def constructs(size: int) -> list[tuple[str, str]]:
    """The worst case of each HTML construct, ``size`` bytes of it."""
    links = size // (len("<a href=x>y") + len("</a>"))
    return [
        ("spaces_in_pre", fill("<pre>x", " ", "x</pre>", size)),
        ("newlines_in_pre", fill("<pre>x", "\n", "x</pre>", size)),
        ("br_run", fill("x", "<br>", "x", size)),
        ("spaces_between_tags", fill("x", " <b></b>", "x", size)),
        ("paragraph_breaks", fill("x", "<p></p> \n", "x", size)),
        ("unterminated_tags", fill("", "<a", "", size)),
        ("unterminated_end_tags", fill("", "</a", "", size)),
        ("unterminated_comments", fill("", "<!--", "", size)),
        ("unterminated_declarations", fill("", "<!", "", size)),
        ("unterminated_instructions", fill("", "<?", "", size)),
        ("unclosed_quotes", fill("", "<a x='", "", size)),
        ("unclosed_double_quotes", fill("", '<a x="', "", size)),
        ("one_tag_many_attributes", fill("<b", " a", ">", size)),
        ("one_tag_many_values", fill("<b", " a=''", ">", size)),
        ("tiny_tags", fill("", "<b>", "", size)),
        ("nested_links", fill("", "<a href=x>", "y", size)),
        ("nested_links_closed", "<a href=x>y" * links + "</a>" * links),
        ("pills", fill("", '<a href="https://matrix.to/#/@bot_helper:localhost">Helper</a>', "", size)),
        ("nested_lists", fill("", "<ol><li>", "", size)),
        ("list_items", fill("<ul>", "<li>", "", size)),
        ("numeric_references", fill("", "&#", "", size)),
        ("a_huge_numeric_reference", fill("&#", "9", ";", size)),
        ("named_references", fill("", "&amp;", "", size)),
        ("nested_replies", fill("", "<mx-reply>", "", size)),
        ("script_unclosed", fill("<script>", "<", "", size)),
        ("a_huge_list_start", fill('<ol start="', "9", '"><li>x</li></ol>', size)),
        ("markers_in_text", fill("", "\x00\x01\x02 ", "", size)),
    ]


LINE_HTML = constructs(64 * KIB)
FETCHED_PAGES = constructs(64 * KIB)

LINE_BODIES = [
    ("spaces", fill("x", " ", "x")),
    ("newlines", fill("x", "\n", "x")),
    ("reply_fallback_lines", fill("", "> quoted\n", "\nmine")),
    ("at_signs", fill("", "@", "")),
    ("matrix_to_links", fill("", "https://matrix.to/#/@bot_helper:localhost ", "")),
    ("bot_names", fill("", "Helper ", "")),
    ("command_words", fill("!summarise ", "w ", "")),
    ("command_lone_quotes", fill("!summarise ", "\u201c ", "")),
    ("command_keys", fill("!summarise ", "since= ", "")),
    ("command_key_quotes", fill("!summarise ", 'topic="', "")),
]
