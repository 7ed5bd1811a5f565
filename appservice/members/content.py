"""An edition as a Matrix message: the card (when the run composed one) over the text, as HTML within the
spec's allowed tags, and always the whole of it as the plain ``body``; an ``m.notice`` (bots never answer
notices) that mentions nobody."""

from __future__ import annotations

import html
from typing import Any

from appservice.matrix.delivery.render import render
from appservice.members.card import Card, card_html, card_text


def edition_content(text: str, card: Card | None) -> dict[str, Any]:
    rendered = render(text) if text.strip() else None
    body_parts = [card_text(card)] if card is not None else []
    html_parts = [card_html(card)] if card is not None else []
    if rendered is not None:
        body_parts.append(rendered.body)
        html_parts.append(rendered.formatted_body or f"<p>{_escape(rendered.body)}</p>")
    content: dict[str, Any] = {"msgtype": "m.notice", "body": "\n\n".join(body_parts), "m.mentions": {}}
    if card is not None or (rendered is not None and rendered.formatted_body is not None):
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = "".join(html_parts)
    return content


def notice(text: str) -> dict[str, Any]:
    rendered = render(text)
    content: dict[str, Any] = {"msgtype": "m.notice", "body": rendered.body, "m.mentions": {}}
    if rendered.formatted_body is not None:
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = rendered.formatted_body
    return content


def _escape(text: str) -> str:
    return html.escape(text, quote=False).replace("\n", "<br>")
