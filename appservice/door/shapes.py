"""OpenAI's chat-completions shapes (and the Responses API's requests), as the door reads and writes them. Pure:
bytes in, dicts out.

A client's ``system``, ``tools``, ``model``, ``max_tokens``, ``temperature`` (and the rest an SDK sends by
default) are ignored, not refused: refusing them would make the door unusable with the libraries it exists to
serve — but nothing a client sends supplies a prompt, names a tool, chooses a model or raises a limit. The last
user message is the turn; earlier messages are not trusted as history (the run's own context is).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from appservice.door.grants import ROOM_ID

# A room's name as a client says it: shown to the model as data, so kept to one short line.
NAME_CHARS = 100
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
# A turn longer than this is refused (a person does not say a book in one breath).
TURN_CHARS = 20_000


@dataclass(frozen=True)
class Claim:
    """The room a voice session says it is in (None: the person's DM with the bot), with its name."""

    room_id: str | None
    room_name: str | None


@dataclass(frozen=True)
class Asked:
    text: str
    stream: bool
    include_usage: bool
    model: str | None
    claim: Claim | None  # None: the request names no room (the session stays as it is)
    # The door's own extension (``"summon": {"apology": true}``): a turn that fails is answered with the bot's
    # own words for it, as content, instead of an error — for a front end that wants something spoken.
    apology: bool = False
    # The results a client brings for the client tools its bot called (call id, what came of it): the turn is the
    # run that waits for them, not a new question.
    results: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Bad:
    """A request refused: why (OpenAI's ``message``), the field it is about, and a code."""

    message: str
    code: str
    param: str | None = None


def parse_completion(raw: bytes) -> Asked | Bad:
    """A chat-completions request body: the turn (the last user message's text), whether to stream, and the
    room it names, if any — or why it cannot be taken."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return Bad("The request body is not valid JSON.", "invalid_json")
    if not isinstance(body, dict):
        return Bad("The request body must be a JSON object.", "invalid_json")
    messages = body.get("messages")
    if not isinstance(messages, list):
        return Bad("'messages' is required: a list of messages, the last user message being what is asked.",
                   "invalid_messages", "messages")
    trailing: list[tuple[object, object]] = []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        trailing.insert(0, (message.get("tool_call_id"), _text_of(message.get("content"))))
    if trailing:
        results = _results(trailing, "messages")
        return results if isinstance(results, Bad) else _asked(body, "", include_usage=_usage_asked(body),
                                                               results=results)
    last = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), None)
    if last is None:
        return Bad("There is no user message: the last user message is what is asked.", "no_user_message", "messages")
    text = _text_of(last.get("content"))
    if text is None:
        return Bad("The last user message has no text (a string, or text parts).", "no_user_message", "messages")
    if not text.strip():
        return Bad("The last user message is empty.", "no_user_message", "messages")
    if len(text) > TURN_CHARS:
        return Bad(f"The last user message is over {TURN_CHARS} characters.", "turn_too_long", "messages")
    return _asked(body, text, include_usage=_usage_asked(body))


def _usage_asked(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _results(given: list[tuple[object, object]], param: str) -> tuple[tuple[str, str], ...] | Bad:
    """The results a request brings for its bot's client tools: each a call id and what came of it."""
    out: list[tuple[str, str]] = []
    for call_id, result in given:
        if not isinstance(call_id, str) or not call_id or len(call_id) > 128:
            return Bad("A tool result names the call it answers (its id, at most 128 characters).",
                       "invalid_tool_result", param)
        if not isinstance(result, str) or len(result) > TURN_CHARS:
            return Bad(f"A tool result is text of at most {TURN_CHARS} characters.", "invalid_tool_result", param)
        out.append((call_id, result))
    return tuple(out)


def parse_responses(raw: bytes) -> Asked | Bad:
    """A Responses API request body (``POST /v1/responses``): the turn is ``input`` when it is a string, else the
    last user message among its items (its text, or its ``input_text`` parts). ``instructions``, ``tools``,
    ``previous_response_id`` and the rest are ignored, as chat completions' are: the bot's file decides."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return Bad("The request body is not valid JSON.", "invalid_json")
    if not isinstance(body, dict):
        return Bad("The request body must be a JSON object.", "invalid_json")
    given = body.get("input")
    trailing: list[tuple[object, object]] = []
    for item in reversed(given) if isinstance(given, list) else ():
        if not isinstance(item, dict) or item.get("type") != "function_call_output":
            break
        trailing.insert(0, (item.get("call_id"), item.get("output")))
    if trailing:
        results = _results(trailing, "input")
        return results if isinstance(results, Bad) else _asked(body, "", include_usage=True, results=results)
    if isinstance(given, str):
        text: str | None = given
    elif isinstance(given, list):
        last = next((i for i in reversed(given) if isinstance(i, dict) and i.get("role") == "user"
                     and i.get("type", "message") == "message"), None)
        if last is None:
            return Bad("There is no user message in 'input': the last one is what is asked.", "no_user_message",
                       "input")
        text = _text_of(last.get("content"))
    else:
        return Bad("'input' is required: a string, or a list of items, the last user message being what is asked.",
                   "invalid_input", "input")
    if text is None:
        return Bad("The last user message has no text (a string, or input_text parts).", "no_user_message", "input")
    if not text.strip():
        return Bad("The last user message is empty.", "no_user_message", "input")
    if len(text) > TURN_CHARS:
        return Bad(f"The last user message is over {TURN_CHARS} characters.", "turn_too_long", "input")
    return _asked(body, text, include_usage=True)


def _asked(body: dict[str, Any], text: str, *, include_usage: bool,
           results: tuple[tuple[str, str], ...] = ()) -> Asked | Bad:
    """What both APIs' requests say the same way: stream, model, the door's extension, the session's room."""
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        return Bad("'stream' is true or false.", "invalid_stream", "stream")
    model = body.get("model")
    extension = body.get("summon")
    if extension is not None and (not isinstance(extension, dict) or not isinstance(extension.get("apology", False), bool)):
        return Bad("'summon' is an object: {\"apology\": true|false}.", "invalid_extension", "summon")
    apology = isinstance(extension, dict) and extension.get("apology") is True
    claim: Claim | None = None
    if "session_context" in body:
        frame = parse_frame(body["session_context"])
        if isinstance(frame, Bad):
            return Bad(frame.message, frame.code, "session_context")
        claim = frame
    return Asked(text=text.strip(), stream=bool(stream), include_usage=include_usage,
                 model=model if isinstance(model, str) and model else None, claim=claim, apology=apology,
                 results=results)


def parse_frame(frame: Any) -> Claim | Bad:
    """A ``session.context`` frame (``{type?, version?, room_id, room_name?}``): the room the session says it
    is in; ``room_id`` null is the person's DM."""
    if not isinstance(frame, dict):
        return Bad("A session context is an object: {room_id, room_name}.", "invalid_session_context")
    if frame.get("type", "session.context") != "session.context" or frame.get("version", 1) != 1:
        return Bad("This door takes session.context frames of version 1.", "invalid_session_context")
    room = frame.get("room_id")
    if room is not None and (not isinstance(room, str) or not ROOM_ID.fullmatch(room)):
        return Bad("room_id is a room's id (!id:server), or null for the direct conversation.",
                   "invalid_session_context")
    name = frame.get("room_name")
    clean = _CONTROL.sub(" ", name).strip()[:NAME_CHARS] if isinstance(name, str) else None
    return Claim(room_id=room, room_name=clean or None if room is not None else None)


def _text_of(content: Any) -> str | None:
    """A message's text: a string, or its text parts joined (chat's ``text``, the Responses API's
    ``input_text``; images and audio parts are not read)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part["text"] for part in content
                 if isinstance(part, dict) and part.get("type") in ("text", "input_text")
                 and isinstance(part.get("text"), str)]
        return "\n".join(texts) if texts else None
    return None


# --- what goes back ------------------------------------------------------------------------------------

def error_body(message: str, *, type: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape (the SDKs read it into their exceptions)."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def model_object(slug: str, name: str, created: int, extra: dict[str, Any]) -> dict[str, Any]:
    """A bot as OpenAI's model object (``GET /v1/models``, ``GET /v1/models/{id}``)."""
    return {"id": slug, "object": "model", "created": created, "owned_by": "summon", "name": name, **extra}


def completion(*, run_id: int, bot: str, created: int, text: str, usage: dict[str, int] | None,
               summon: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": completion_id(run_id), "object": "chat.completion", "created": created, "model": bot,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "summon": summon,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def chunk(*, run_id: int, bot: str, created: int, delta: dict[str, Any], finish: str | None = None,
          summon: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": completion_id(run_id), "object": "chat.completion.chunk", "created": created, "model": bot,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if summon is not None:
        body["summon"] = summon
    return body


def usage_chunk(*, run_id: int, bot: str, created: int, usage: dict[str, int]) -> dict[str, Any]:
    return {"id": completion_id(run_id), "object": "chat.completion.chunk", "created": created, "model": bot,
            "choices": [], "usage": usage}


def usage_of(tokens_in: int, tokens_out: int) -> dict[str, int]:
    return {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}


def completion_id(run_id: int) -> str:
    return f"chatcmpl-summon-{run_id}"


def event(data: dict[str, Any] | str) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()
