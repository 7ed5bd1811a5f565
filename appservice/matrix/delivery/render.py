"""Answers as Matrix messages: markdown in, a plain `body` and safe HTML out.

Model output is untrusted: markdown-it renders it with raw HTML disabled (so a
`<script>` in an answer is shown, not run), and nh3 then cuts the result down
to exactly the tags and attributes the spec allows in `formatted_body`
(client-server API, "m.room.message msgtypes", HTML). Pure: no I/O.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML, RendererProtocol
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from engine.surface import RunInfo

__all__ = ["MATRIX_ATTRIBUTES", "MATRIX_TAGS", "Rendered", "answer_content", "render", "sanitize"]

MATRIX_TAGS = frozenset(
    "del h1 h2 h3 h4 h5 h6 blockquote p a ul ol sup sub li b i u strong em s code hr br div "
    "table thead tbody tr th td caption pre span img details summary".split()
)
MATRIX_ATTRIBUTES: dict[str, frozenset[str]] = {
    "span": frozenset({"data-mx-bg-color", "data-mx-color", "data-mx-spoiler", "data-mx-maths"}),
    "div": frozenset({"data-mx-maths"}),
    "a": frozenset({"href", "target"}),
    "img": frozenset({"width", "height", "alt", "title", "src"}),
    "ol": frozenset({"start"}),
    "code": frozenset({"class"}),
}
LINK_SCHEMES = ("https", "http", "ftp", "mailto", "magnet")
_LANGUAGE_CLASS = re.compile(r"^language-[\w+#.-]+$")


@dataclass(frozen=True, slots=True)
class Rendered:
    """`body` is always sent; `formatted_body` only when the HTML shows more than the text."""

    body: str
    formatted_body: str | None


def render(markdown: str) -> Rendered:
    """The Matrix content for an answer written in markdown."""
    body = markdown.strip()
    formatted = sanitize(_MARKDOWN.render(body)).strip()
    if not formatted or _adds_nothing(formatted, body):
        return Rendered(body=body, formatted_body=None)
    return Rendered(body=body, formatted_body=formatted)


def sanitize(fragment: str) -> str:
    """`fragment` reduced to the spec's allowed HTML; anything else is dropped."""
    return _CLEANER.clean(fragment)


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    # nh3 checks schemes for href and src alike; the spec is narrower per tag.
    # Must never raise: nh3 reports callback errors through sys.unraisablehook.
    if tag == "img" and attribute == "src":
        return value if value.lower().startswith("mxc://") else None
    if tag == "a" and attribute == "href":
        scheme, colon, _ = value.partition(":")
        return value if colon and scheme.strip().lower() in LINK_SCHEMES else None
    if tag == "code" and attribute == "class":
        kept = [name for name in value.split() if _LANGUAGE_CLASS.match(name)]
        return " ".join(kept) if kept else None
    if tag == "ol" and attribute == "start":
        return value if value.isdecimal() else None
    return value


_CLEANER = nh3.Cleaner(
    tags=set(MATRIX_TAGS),
    clean_content_tags={"script", "style"},
    # "*" empty: nh3 would otherwise allow `lang` and `title` on every tag.
    attributes={"*": set(), **{tag: set(names) for tag, names in MATRIX_ATTRIBUTES.items()}},
    attribute_filter=_attribute_filter,
    link_rel=None,  # `rel` is not an allowed attribute
    url_schemes={*LINK_SCHEMES, "mxc"},
    url_relative="deny",
)


def _image(
    self: RendererProtocol, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """An `mxc://` image stays an image; any other becomes a link to it.

    Clients only load images from the homeserver: an outside `src` would let the
    model make every reader's client fetch an address of its choosing.
    """
    renderer = cast(RendererHTML, self)
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    if src.lower().startswith("mxc://"):
        return renderer.image(tokens, idx, options, env)
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    return f'<a href="{escapeHtml(src)}">{escapeHtml(alt or src)}</a>'


def _adds_nothing(formatted: str, body: str) -> bool:
    """True for a single plain paragraph that reads exactly like the body."""
    match = re.fullmatch(r"<p>(.*)</p>", formatted, re.DOTALL)
    if match is None:
        return False
    inner = re.sub(r"<br\s*/?>\n?", "\n", match.group(1))
    return "<" not in inner and html.unescape(inner) == body


_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["table", "strikethrough"])
_MARKDOWN.add_render_rule("image", _image)


def answer_content(text: str, *, thread_root: str | None, reply_to: str | None, mention: str | None) -> dict[str, Any]:
    """A bot's notice: rendered, replying to ``reply_to`` (in its thread when there is one), and
    mentioning ``mention`` (the asker) — or nobody."""
    rendered = render(text)
    content: dict[str, Any] = {"msgtype": "m.notice", "body": rendered.body,
                               "m.mentions": {"user_ids": [mention]} if mention else {}}
    if rendered.formatted_body is not None:
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = rendered.formatted_body
    if thread_root:
        relates: dict[str, Any] = {"rel_type": "m.thread", "event_id": thread_root, "is_falling_back": False}
        if reply_to:
            relates["m.in_reply_to"] = {"event_id": reply_to}
        content["m.relates_to"] = relates
    elif reply_to:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return content


def progress_txn(run_id: int) -> str:
    return f"summon.run{run_id}.progress"


def run_content(run: RunInfo, text: str, *, mention: bool = True) -> dict[str, Any]:
    """A notice about ``run``: where it was asked, mentioning the asker unless ``mention`` is False."""
    return answer_content(text, thread_root=run.thread, reply_to=run.trigger_event,
                          mention=run.asked_by if mention else None)
