"""What a person reads: one Matrix room event turned into a `Line`.

`read_event` is pure: a ClientEvent dict as Synapse delivers it in an appservice
transaction goes in, a frozen `Line` (or None for things nobody reads) comes out.
It never raises on a malformed event — the homeserver forwards whatever a client
sent, so every field is checked before it is trusted.

The words here are markers (`[image: …]`, `[voice note]`, `* ` for emotes), not
framing; the context builder adds display names and the strings file phrases
state changes such as "X joined" from `Line.membership`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

from appservice.matrix.inbound.htmltext import (
    HTML_LIMIT,
    Flat,
    flatten,
    html_to_text,
    matrix_to_user_id,
    strip_mx_reply,
    strip_reply_fallback,
    too_long,
)

__all__ = [
    "Line",
    "Membership",
    "apply_edits",
    "html_to_text",
    "matrix_to_user_id",
    "read_event",
    "strip_reply_fallback",
]

log = logging.getLogger(__name__)

HTML_FORMAT = "org.matrix.custom.html"
MEDIA_KINDS = {"m.image": "image", "m.file": "file", "m.video": "video", "m.audio": "audio"}
VOICE_FLAGS = ("org.matrix.msc3245.voice", "org.matrix.msc2516.voice")
UNTRANSCRIBED = "[voice note]"  # what a voice note says until it is heard (a context shows the site's words)
POLL_START_TYPES = ("m.poll.start", "org.matrix.msc3381.poll.start")
# Extensible-events text keys, stable first (MSC1767); polls use either.
_TEXT_KEYS = ("m.text", "org.matrix.msc1767.text", "body")


@dataclass(frozen=True, slots=True)
class Membership:
    """The hook for phrasing "X joined" later: what changed, for whom.

    `membership` is the new value (join, leave, invite, ban, knock), `target` the
    state_key (the user it is about, who may differ from the sender for kicks,
    bans and invites), `previous` the prior membership from `unsigned.prev_content`
    (so "left" can be told from "was kicked", and a display-name change — join
    after join — from a new arrival).
    """

    membership: str
    target: str
    previous: str | None = None
    display_name: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Line:
    """One room event as a person reads it.

    `text` is the "said" text: fallbacks stripped, HTML flattened, media and
    polls as markers. For an edit it is the new text and `replaces` names the
    original; for a redaction it is "" and `redacts` names the target.
    `mentions` is the event's own top-level `m.mentions.user_ids` (None when the
    event has no `m.mentions` at all — that distinction decides how mentions are
    read). `formatted_body` is the HTML with any `<mx-reply>` removed (None when there is none, or it
    is past `HTML_LIMIT` and the plain `body` was read instead). `text_with_ids` is the same words with
    each pill as the user id it points at, when that differs from `text` (how mentions and a command's
    person arguments are read: `line.text_with_ids or line.text`) — the HTML is flattened once, here.
    """

    event_id: str
    room_id: str
    sender: str
    ts: int
    event_type: str
    text: str
    msgtype: str | None = None
    thread_root: str | None = None
    reply_to: str | None = None
    replaces: str | None = None
    redacts: str | None = None
    is_notice: bool = False
    is_state: bool = False
    mentions: tuple[str, ...] | None = None
    formatted_body: str | None = None
    membership: Membership | None = None
    is_voice: bool = False
    media_url: str | None = None
    text_with_ids: str | None = None


def read_event(event: Mapping[str, Any], *, transcript: str | None = None) -> Line | None:
    """The line a person reads for `event`, or None when nobody reads it.

    None for: encrypted events (never stored or read), already-redacted events,
    event types that are not conversation (reactions, poll votes, receipts…),
    and events too malformed to name their id, room, sender and time.
    `transcript` is the text of a voice note when one has been made.
    """
    if not isinstance(event, Mapping):
        return None
    event_type = event.get("type")
    event_id = event.get("event_id")
    room_id = event.get("room_id")
    sender = event.get("sender")
    ts = event.get("origin_server_ts")
    if not (
        _is_str(event_type) and _is_str(event_id) and _is_str(room_id) and _is_str(sender) and _is_int(ts)
    ):
        return None
    if event_type == "m.room.encrypted":
        return None
    content = event.get("content")
    base = Line(event_id=event_id, room_id=room_id, sender=sender, ts=ts, event_type=event_type, text="")

    if event_type == "m.room.redaction":
        redacts = event.get("redacts")
        if not _is_str(redacts) and isinstance(content, Mapping):
            redacts = content.get("redacts")
        return replace(base, redacts=redacts) if _is_str(redacts) else None
    if "state_key" in event:
        # Redaction keeps `membership`, so a redacted join still reads as a join.
        return _read_state(base, event, content)
    unsigned = event.get("unsigned")
    if isinstance(unsigned, Mapping) and "redacted_because" in unsigned:
        return None
    if not isinstance(content, Mapping):
        return None
    if event_type == "m.room.message":
        return _read_message(base, content, transcript)
    if event_type == "m.sticker":
        name = _str(content.get("body")) or "sticker"
        return _with_relations(
            replace(base, text=f"[sticker: {name}]", media_url=_str(content.get("url"))), content
        )
    if event_type in POLL_START_TYPES:
        text = _poll_text(content)
        return _with_relations(replace(base, text=text), content) if text else None
    return None


def apply_edits(lines: Sequence[Line]) -> list[Line]:
    """The conversation as it reads now: latest edits in place, redactions gone.

    Each original takes the text of its latest valid edit (same room, sender and
    event type, the original not itself an edit; latest by `ts`, ties to the
    larger event id — the spec's aggregation rule). Edits themselves, redacted
    lines and redaction lines are dropped. A redacted edit no longer counts, so
    the text falls back to the previous edit. Relations (thread, reply) and
    mentions stay the original's, as the spec keeps `m.relates_to` on replace.
    """
    redacted = {line.redacts for line in lines if line.redacts is not None}
    kept = [line for line in lines if line.event_id not in redacted and line.redacts is None]
    by_id = {line.event_id: line for line in kept}
    latest: dict[str, Line] = {}
    for edit in kept:
        if edit.replaces is None:
            continue
        original = by_id.get(edit.replaces)
        if (
            original is None
            or original.replaces is not None
            or original.sender != edit.sender
            or original.room_id != edit.room_id
            or original.event_type != edit.event_type
            or original.is_state
        ):
            continue
        best = latest.get(original.event_id)
        if best is None or (edit.ts, edit.event_id) > (best.ts, best.event_id):
            latest[original.event_id] = edit
    result: list[Line] = []
    for line in kept:
        if line.replaces is not None:
            continue
        newest = latest.get(line.event_id)
        if newest is None:
            result.append(line)
        else:
            result.append(
                replace(
                    line,
                    text=newest.text,
                    msgtype=newest.msgtype,
                    is_notice=newest.is_notice,
                    formatted_body=newest.formatted_body,
                    text_with_ids=newest.text_with_ids,
                    is_voice=newest.is_voice,
                    media_url=newest.media_url,
                )
            )
    return result


# --- messages ---------------------------------------------------------------


def _read_message(base: Line, content: Mapping[str, Any], transcript: str | None) -> Line | None:
    relates = content.get("m.relates_to")
    relates = relates if isinstance(relates, Mapping) else {}
    if relates.get("rel_type") == "m.replace" and _is_str(relates.get("event_id")):
        new_content = content.get("m.new_content")
        if isinstance(new_content, Mapping):
            # The edit's own m.mentions says whom *this* event notifies (MSC3952).
            edited = _message_body(base, new_content, transcript, is_reply=False)
            if edited is None:
                return None
            return replace(edited, replaces=relates["event_id"], mentions=_mentions(content))
        # An m.replace without m.new_content is not a valid edit: read it as sent.
    line = _message_body(base, content, transcript, is_reply="m.in_reply_to" in relates)
    return _with_relations(line, content) if line is not None else None


def _message_body(
    base: Line, content: Mapping[str, Any], transcript: str | None, *, is_reply: bool
) -> Line | None:
    msgtype = _str(content.get("msgtype"))
    body = _str(content.get("body"))
    html = _formatted(content, base)
    if html is not None:
        html = strip_mx_reply(html)
    if body is not None and is_reply:
        body = strip_reply_fallback(body)
    flat = flatten(html) if html is not None else Flat("", "")
    line = replace(
        base,
        msgtype=msgtype,
        is_notice=msgtype == "m.notice",
        mentions=_mentions(content),
        formatted_body=html,
    )

    if msgtype in MEDIA_KINDS:
        url = _str(content.get("url"))
        if url is None:
            file = content.get("file")
            url = _str(file.get("url")) if isinstance(file, Mapping) else None
        if msgtype == "m.audio" and any(flag in content for flag in VOICE_FLAGS):
            text = (
                f"{UNTRANSCRIBED} {transcript.strip()}" if transcript and transcript.strip() else UNTRANSCRIBED
            )
            return replace(line, text=text, is_voice=True, media_url=url)
        filename = _str(content.get("filename"))
        name = filename or body or MEDIA_KINDS[msgtype]
        # Since v1.10 a `filename` that differs from `body` makes `body` a caption.
        caption = body if filename and body and body != filename else None
        if caption is not None and html is not None:
            caption = flat.text or caption
        text = f"[{MEDIA_KINDS[msgtype]}: {name}]" + (f" {caption}" if caption else "")
        return _with_ids(replace(line, text=text, media_url=url), flat)
    if msgtype == "m.location":
        geo = _str(content.get("geo_uri")) or ""
        text = " ".join(part for part in (body or "", geo) if part)
        return _with_ids(replace(line, text=f"[location: {text}]"), flat)

    text = flat.text
    if not text:
        text = body.strip() if body is not None else ""
    if not text:
        return None
    if msgtype == "m.emote":
        # The sender's display name is the context builder's to add: "* Alice waves".
        text = f"* {text}"
    return _with_ids(replace(line, text=text), flat)


def _with_ids(line: Line, flat: Flat) -> Line:
    with_ids = flat.with_ids or line.text
    return replace(line, text_with_ids=with_ids) if with_ids != line.text else line


def _with_relations(line: Line, content: Mapping[str, Any]) -> Line:
    relates = content.get("m.relates_to")
    if not isinstance(relates, Mapping):
        return line
    thread_root = None
    if relates.get("rel_type") == "m.thread" and _is_str(relates.get("event_id")):
        thread_root = relates["event_id"]
    reply_to = None
    in_reply_to = relates.get("m.in_reply_to")
    if isinstance(in_reply_to, Mapping) and _is_str(in_reply_to.get("event_id")):
        # In a thread, is_falling_back marks a reply added only for unthreaded clients.
        if not (thread_root is not None and relates.get("is_falling_back") is True):
            reply_to = in_reply_to["event_id"]
    return replace(line, thread_root=thread_root, reply_to=reply_to)


def _mentions(content: Mapping[str, Any]) -> tuple[str, ...] | None:
    if "m.mentions" not in content:
        return None
    mentions = content["m.mentions"]
    # Present but malformed still declares intent: it names nobody.
    user_ids = mentions.get("user_ids") if isinstance(mentions, Mapping) else None
    if not isinstance(user_ids, list):
        return ()
    return tuple(uid for uid in user_ids if _is_str(uid))


def _formatted(content: Mapping[str, Any], base: Line) -> str | None:
    html = content.get("formatted_body")
    if content.get("format") != HTML_FORMAT or not _is_str(html):
        return None
    if too_long(html):
        log.warning("the formatted_body of %s is past the %d KiB read; its body is read instead", base.event_id,
                    HTML_LIMIT // 1024, extra={"room": base.room_id, "sender": base.sender})
        return None
    return html


# --- state, polls -------------------------------------------------------------


def _read_state(base: Line, event: Mapping[str, Any], content: Any) -> Line | None:
    state_key = event.get("state_key")
    if not isinstance(state_key, str):
        return None
    line = replace(base, is_state=True)
    if base.event_type != "m.room.member" or not isinstance(content, Mapping):
        return line
    membership = _str(content.get("membership"))
    if membership is None:
        return line
    previous = None
    unsigned = event.get("unsigned")
    prev_content = unsigned.get("prev_content") if isinstance(unsigned, Mapping) else None
    if isinstance(prev_content, Mapping):
        previous = _str(prev_content.get("membership"))
    return replace(
        line,
        membership=Membership(
            membership=membership,
            target=state_key,
            previous=previous,
            display_name=_str(content.get("displayname")),
            reason=_str(content.get("reason")),
        ),
    )


def _poll_text(content: Mapping[str, Any]) -> str | None:
    for key in ("m.poll", "org.matrix.msc3381.poll.start"):
        poll = content.get(key)
        if not isinstance(poll, Mapping):
            continue
        question = _extensible_text(poll.get("question"))
        answers = poll.get("answers")
        options = (
            [text for answer in answers if (text := _extensible_text(answer))]
            if isinstance(answers, list)
            else []
        )
        if question:
            lines = [f"[poll] {question}", *(f"{n}. {option}" for n, option in enumerate(options, 1))]
            return "\n".join(lines)
    fallback = _extensible_text(content)
    return f"[poll] {fallback}" if fallback else None


def _extensible_text(value: Any) -> str | None:
    """Text from an extensible-events block: a string, or [{mimetype, body}] preferring plain."""
    if not isinstance(value, Mapping):
        return None
    for key in _TEXT_KEYS:
        text = value.get(key)
        if isinstance(text, str) and text.strip():
            return text.strip()
        if isinstance(text, list):
            bodies = [
                (item.get("mimetype", "text/plain") != "text/plain", item["body"])
                for item in text
                if isinstance(item, Mapping) and _is_str(item.get("body"))
            ]
            if bodies:
                plain_first = sorted(bodies, key=lambda pair: pair[0])
                is_html, body = plain_first[0]
                if is_html and too_long(body):
                    continue  # HTML alone, and past the limit: the next key may say it plainly
                return html_to_text(body) if is_html else str(body).strip()
    return None


def _is_str(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and value != ""


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
