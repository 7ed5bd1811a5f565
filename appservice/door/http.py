"""The door's HTTP side, on a listener of its own (``door.listen``): OpenAI's chat completions for voice front
ends and anything that speaks OpenAI, on grants (docs/door.md).

    POST /v1/chat/completions   a turn: the last user message asks the grant's bot; stream or one object
    POST /v1/responses          the same turn on the Responses API (its events when streamed: wires.py)
    GET  /v1/models             the bots this grant may reach (one: its own)
    GET  /v1/models/{id}        that bot, by its slug
    POST /v1/session/context    a session.context frame: the room the session is in (answered with the ack)
    POST /v1/door/start         a grant, from a person's own Matrix access token (checked with whoami)

Every request but the start route carries ``Authorization: Bearer <grant>``, verified on every request; a grant
that does not verify — forged, tampered, expired, under an unknown key, for another bot or another room — gets
the same 401 and the same body. A bad body is a 400 in OpenAI's error shape; a ceiling is a 429 in words, with
``Retry-After``. A ``model`` is the grant's bot or absent: any other name is 404 ``model_not_found`` naming the
bot the grant opens (another of our bots' slugs is a grant used elsewhere: the 401). Every response carries
``x-request-id`` (the client's own, when it sent a sane one), and a path or method the door does not serve is
answered in OpenAI's error shape too (404, 405), never aiohttp's plain text. A request that brings the results
of client tools its bot called (``tool`` messages, ``function_call_output`` items: ``appservice.door.handed``)
is answered by the run that waits for them; a result no call of the session waits for is a 409.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from appservice.config import Door as DoorConfig
from appservice.door.asking import Asked as DoorAsked
from appservice.door.asking import DoorAsking
from appservice.door.binding import Ack, Binding
from appservice.door.errors import GrantRefused
from appservice.door.grants import ROOM_ID, Grant, verify
from appservice.door.issue import issue
from appservice.door.replies import Replies
from appservice.door.shapes import (
    Asked,
    Bad,
    Claim,
    error_body,
    model_object,
    parse_completion,
    parse_frame,
    parse_responses,
)
from appservice.door.surface import SURFACE
from appservice.door.tables import DoorTables
from appservice.matrix.errors import MatrixError
from appservice.matrix.ours import PUPPET_PREFIX, in_our_namespace
from appservice.voices import VOICE
from engine.clock import Clock
from engine.content import Bot, Registry
from engine.run.refusals import Refused
from engine.store import Store

log = logging.getLogger(__name__)

UNAUTHORIZED = error_body("The grant was not accepted.", type="invalid_request_error", code="invalid_grant")
NOT_A_SESSION = error_body("The homeserver did not take this access token.", type="invalid_request_error",
                           code="invalid_session")
START_BODY = 16 * 1024
# Why the start route mints no grant for a room (the binding's verdicts, as a client reads them).
ROOM_REFUSED = {
    "person_not_joined": "You are not in that room.",
    "bot_not_joined": "The bot is not in that room.",
    "encrypted": "That room is encrypted; the bot does not take part in encrypted rooms.",
    "no_answer": "The homeserver did not say whether you are both in that room; try again.",
}
REQUEST_ID = web.RequestKey("request_id", str)  # a request's id, kept on it (the middleware sets it; the response carries it)
_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id(given: str | None) -> str:
    """The client's request id when it is a sane one (letters, digits, ``.-_:``, at most 128), else one of ours."""
    return given if given is not None and _SANE_ID.fullmatch(given) else f"req_{uuid.uuid4().hex}"


@web.middleware
async def edges(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                ) -> web.StreamResponse:
    """Every request gets an id; a route or method the door does not serve is answered in OpenAI's shape."""
    request[REQUEST_ID] = request_id(request.headers.get("X-Request-Id"))
    try:
        return await handler(request)
    except web.HTTPMethodNotAllowed as exc:
        return _json(error_body(f"{request.method} is not allowed on {request.path} (it takes "
                                f"{', '.join(sorted(exc.allowed_methods))}).", type="invalid_request_error",
                                code="method_not_allowed"), 405, headers={"Allow": ", ".join(sorted(exc.allowed_methods))})
    except web.HTTPNotFound:
        return _json(error_body(f"Invalid URL ({request.method} {request.path[:200]}).", type="invalid_request_error",
                                code="unknown_url"), 404)


async def stamp(request: web.Request, response: web.StreamResponse) -> None:
    """``x-request-id`` on every response, streamed ones too (set as its headers go out)."""
    response.headers["x-request-id"] = request.get(REQUEST_ID) or request_id(None)


def _json(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


class DoorEndpoint:
    def __init__(self, config: DoorConfig, *, server_name: str, service_user: str, store: Store,
                 registry: Callable[[], Registry], clock: Clock, asking: DoorAsking, binding: Binding,
                 replies: Replies, whoami: Callable[[str], Any] | None, puppet_prefix: str = PUPPET_PREFIX) -> None:
        self.puppet_prefix = puppet_prefix
        self.config = config
        self.audience = config.audience_for(server_name)
        self.server_name = server_name
        self.service_user = service_user
        self.store = store
        self._registry = registry
        self.clock = clock
        self.asking = asking
        self.binding = binding
        self.replies = replies
        self.whoami = whoami

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/v1/models/{model}", self.model)
        app.router.add_post("/v1/session/context", self.session_context)
        app.router.add_post("/v1/door/start", self.start)
        app.middlewares.append(edges)
        app.on_response_prepare.append(stamp)

    # --- the grant -------------------------------------------------------------------------------------------

    def grant_of(self, request: web.Request) -> Grant:
        """The request's grant, verified now; ``GrantRefused`` (one answer for every reason) otherwise."""
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise GrantRefused("no bearer grant")
        try:
            return verify(token.strip(), self.config.keys, audience=self.audience, now=self.clock.now())
        except GrantRefused as exc:
            log.info("door grant refused: %s", exc, extra={"peer": request.remote})
            raise

    def refuse_elsewhere(self, grant: Grant, asked: Asked | None, claim: Claim | None) -> None:
        """A grant used for another bot (a request naming one of ours by its slug) or another room (a claim on a
        room other than the one room it names) is refused like a forged one."""
        if asked is not None and asked.model is not None and asked.model != grant.bot \
                and self._registry().get(asked.model) is not None:
            raise GrantRefused(f"grant {grant.id} for {grant.bot} used for {asked.model}")
        if claim is not None and grant.room is not None and claim.room_id not in (None, grant.room):
            raise GrantRefused(f"grant {grant.id} for room {grant.room} used for {claim.room_id}")

    async def body_of(self, request: web.Request, cap: int) -> bytes | None:
        """The body, read up to ``cap`` bytes; None when it is longer."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > cap:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    # --- the routes ----------------------------------------------------------------------------------------

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.turn(request, parse_completion, responses=False)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self.turn(request, parse_responses, responses=True)

    async def turn(self, request: web.Request, parse: Callable[[bytes], Asked | Bad], *,
                   responses: bool) -> web.StreamResponse:
        """One turn, on either API: the grant, the body, the room, the ask, then the answer in that API's shape."""
        try:
            grant = self.grant_of(request)
            raw = await self.body_of(request, self.config.max_body_size)
            if raw is None:
                return self.bad(Bad(f"The request body is over {self.config.max_body_size} bytes.", "body_too_large"))
            asked = parse(raw)
            if isinstance(asked, Bad):
                return self.bad(asked)
            claim = asked.claim or await self.first_claim(grant)
            self.refuse_elsewhere(grant, asked, claim)
        except GrantRefused:
            return _json(UNAUTHORIZED, 401)
        if asked.model is not None and asked.model != grant.bot:
            return self.no_such_model(asked.model, grant)
        ack = await self.binding.claim(grant, claim) if claim is not None else None
        if asked.results:
            # The results of the client tools its bot called: the turn is the run that waits for them.
            run_id = await self.answer_calls(grant, asked.results)
            session = await self.store.of(DoorTables).session(grant.id)
            if run_id is None or session is None:
                return _json(error_body("No call of this session waits for that result.", type="invalid_request_error",
                                        code="no_such_call", param="messages"), 409)
            waiting = DoorAsked(run_id, session)
            if asked.stream:
                return await self.replies.stream(request, grant, waiting, include_usage=asked.include_usage, ack=ack,
                                                 apology=asked.apology, responses=responses)
            return await self.replies.whole(request, grant, waiting, ack=ack, apology=asked.apology,
                                            responses=responses)
        # The ask is shielded: a client gone while it commits (the first few milliseconds) must not leave a run
        # made and paid for with nobody to hear it — the run it makes is cancelled as soon as it is there.
        asking = asyncio.ensure_future(self.asking.ask(grant, asked.text))
        try:
            result = await asyncio.shield(asking)
        except asyncio.CancelledError:
            self.replies.cancel_once_asked(grant, asking, "the client went away while it was being asked")
            raise
        if isinstance(result, Refused):
            return self.refused(grant, result)
        if asked.stream:
            return await self.replies.stream(request, grant, result, include_usage=asked.include_usage, ack=ack,
                                             apology=asked.apology, responses=responses)
        return await self.replies.whole(request, grant, result, ack=ack, apology=asked.apology, responses=responses)

    async def answer_calls(self, grant: Grant, results: tuple[tuple[str, str], ...]) -> int | None:
        """Keep each result for the call of this session that waits for it; the run they answer (None: none)."""
        answered: int | None = None
        for call_id, result in results:
            run_id = await self.store.of(DoorTables).answer_call(grant.id, call_id, result)
            if run_id is None:
                log.info("door: a result for call %s, which no run of session %s waits for", call_id[:40], grant.id)
            answered = answered or run_id
        return answered

    async def first_claim(self, grant: Grant) -> Claim | None:
        """A grant that names a room claims it on the session's first turn (verified like any claim)."""
        if grant.room is None:
            return None
        session = await self.store.of(DoorTables).session(grant.id)
        return Claim(grant.room, None) if session is None or session.claim == 0 else None

    async def session_context(self, request: web.Request) -> web.Response:
        try:
            grant = self.grant_of(request)
            raw = await self.body_of(request, START_BODY)
            if raw is None:
                return self.bad(Bad(f"A session context is at most {START_BODY} bytes.", "body_too_large"))
            try:
                frame = parse_frame(json.loads(raw))
            except (ValueError, UnicodeDecodeError):
                return self.bad(Bad("The request body is not valid JSON.", "invalid_json"))
            if isinstance(frame, Bad):
                return self.bad(frame)
            self.refuse_elsewhere(grant, None, frame)
        except GrantRefused:
            return _json(UNAUTHORIZED, 401)
        ack: Ack = await self.binding.claim(grant, frame)
        return _json(ack.frame())

    async def models(self, request: web.Request) -> web.Response:
        try:
            grant = self.grant_of(request)
        except GrantRefused:
            return _json(UNAUTHORIZED, 401)
        return _json({"object": "list", "data": self.listed(grant)})

    async def model(self, request: web.Request) -> web.Response:
        """``GET /v1/models/{id}``: the grant's bot by its slug; any other id is not found (naming the bot)."""
        try:
            grant = self.grant_of(request)
        except GrantRefused:
            return _json(UNAUTHORIZED, 401)
        wanted = request.match_info["model"]
        listed = self.listed(grant)
        if not listed or wanted != grant.bot:
            return self.no_such_model(wanted, grant)
        return _json(listed[0])

    def listed(self, grant: Grant) -> list[dict[str, Any]]:
        """The models this grant reaches: its bot, while it is published for the door; else none."""
        bot = self._registry().get(grant.bot)
        if bot is None or SURFACE not in bot.surfaces:
            return []
        return [model_object(bot.slug, bot.name, int(grant.issued_at.timestamp()), voice_of(bot))]

    def no_such_model(self, wanted: str, grant: Grant) -> web.Response:
        return _json(error_body(f"The model {wanted[:64]!r} does not exist here; this grant opens {grant.bot!r}.",
                                type="invalid_request_error", code="model_not_found", param="model"), 404)

    async def start(self, request: web.Request) -> web.Response:
        """A grant for the person whose own Matrix access token this is (asked of the homeserver, never kept)."""
        if not self.config.start or self.whoami is None:
            return _json(error_body("This door mints no grants from sessions.", type="invalid_request_error",
                                    code="start_closed"), 404)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _json(NOT_A_SESSION, 401)
        raw = await self.body_of(request, START_BODY)
        try:
            body = json.loads(raw) if raw else None
        except (ValueError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("bot"), str):
            return self.bad(Bad("The body is {\"bot\": <slug>, \"room_id\"?: <!id:server>, \"one_to_one\"?: true}.",
                                "invalid_start", "bot"))
        room = body.get("room_id")
        minutes = body.get("minutes", self.config.minutes)
        one_to_one = body.get("one_to_one", False)
        if not isinstance(one_to_one, bool):
            return self.bad(Bad("one_to_one is true (the session is heard by this person alone) or false.",
                                "invalid_start", "one_to_one"))
        if room is not None and (not isinstance(room, str) or not ROOM_ID.fullmatch(room)):
            return self.bad(Bad("room_id is a room's id (!id:server).", "invalid_start", "room_id"))
        if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not 0 < minutes <= self.config.minutes:
            return self.bad(Bad(f"minutes is at most {self.config.minutes:g}.", "invalid_start", "minutes"))
        try:
            person = await self.whoami(token.strip())
        except MatrixError as exc:
            log.info("start refused: the homeserver did not take the access token (%s)", exc.status)
            return _json(NOT_A_SESSION, 401)
        if in_our_namespace(person, server_name=self.server_name, service_user=self.service_user,
                            puppet_prefix=self.puppet_prefix):
            return _json(error_body("A bot's session does not start a door.", type="invalid_request_error",
                                    code="not_a_person"), 403)
        bot = self._registry().get(body["bot"])
        if bot is None or SURFACE not in bot.surfaces:
            return _json(error_body(f"There is no bot {body['bot'][:64]!r} to talk to here.",
                                    type="invalid_request_error", code="model_not_found", param="bot"), 404)
        if room is not None:
            # A grant for a room is minted only when the person and the bot are both in it now, so a refusal is
            # said here and not first in the session's first turn.
            verdict = await self.binding.check(room, person, bot.user_id)
            if verdict != "joined":
                reason = "no_answer" if verdict == "unknown" else verdict
                log.info("start refused for %s in %s: %s", person, room, reason, extra={"bot": bot.slug, "room": room})
                return _json(error_body(ROOM_REFUSED.get(reason, "The room could not be checked."),
                                        type="invalid_request_error", code=reason, param="room_id"), 403)
        try:
            async with self.store.transaction("door_start") as tx:
                grant_token, grant = await issue(tx, self.config, server_name=self.server_name, bot=bot,
                                                 person=person, room=room, now=self.clock.now(),
                                                 minutes=float(minutes), minted_by="start", one_to_one=one_to_one)
        except ValueError as exc:
            return self.bad(Bad(str(exc), "invalid_start"))
        return _json({"grant": grant_token, "bot": bot.slug, "person": person, "room_id": grant.room,
                      "session": grant.id, "expires_at": grant.expires_at.isoformat(), **voice_of(bot)})

    # --- refusals --------------------------------------------------------------------------------------------

    def bad(self, bad: Bad) -> web.Response:
        return _json(error_body(bad.message, type="invalid_request_error", code=bad.code, param=bad.param), 400)

    def refused(self, grant: Grant, refused: Refused) -> web.Response:
        status, type_, message, headers = self.replies.refusal(grant, refused)
        return _json(error_body(message, type=type_, code=refused.reason), status, headers=headers)


def voice_of(bot: Bot) -> dict[str, Any]:
    """How the bot sounds (its file's ``voice:``), for the front end that speaks it: the voice, the ones a
    listener may choose, the speech provider when the site has several, the first words said at once while it
    thinks, and how long a turn waits before the work outlives it. Nothing when the file says none."""
    voice = VOICE.of(bot)
    if voice is None:
        return {}
    said = {"voice": voice.voice, "voices": list(voice.voices), "provider": voice.provider, "first": voice.first,
            "wait": voice.wait}
    return {"voice": {key: value for key, value in said.items() if value not in (None, [])}}
