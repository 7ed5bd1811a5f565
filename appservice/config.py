"""summon.yaml: one file, the way Matrix bridges are configured.

Secrets may come from the environment instead (``SUMMON_AS_TOKEN``, ``SUMMON_HS_TOKEN``,
``SUMMON_DATABASE_DSN``), and the environment wins. The providers, the buying switch and the speech
endpoints are the environment's alone (``provider_settings``, ``speech_from_env``), and code tools are handed
the variables ``tools.code.env`` names (``code_sandbox``): read here, at the root, so the engine reads no
environment. A bad or missing setting stops start-up with one line naming the key (``ConfigError``), never a
stack trace.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.networks import IPvAnyNetwork

from appservice.keys import parse_keys
from appservice.pictures import check_avatar
from appservice.speech.endpoints import STT_USD_PER_MINUTE, TTS_USD_PER_MILLION_CHARS, SpeechSettings
from engine.core.limits import DEFAULT_SLOTS, Caps
from engine.core.permits import ProviderLimits
from engine.errors import ConfigError
from engine.providers.base import DEFAULT_TIMEOUT, ProviderConfig
from engine.providers.config import KINDS, ProviderSettings, env_prefix
from engine.sandbox.box import CodeLimits, Sandbox
from engine.tools.fetch import FetchSettings, make_get

log = logging.getLogger(__name__)


class SecretMark:
    """Marks a setting as a secret (``Secret``): the logs mask every value so marked (``appservice.logs``)."""

    def __repr__(self) -> str:
        return "SECRET"


SECRET = SecretMark()
# A setting whose value is a secret: a token, a key, a signing secret. Every one is masked in the logs, found by
# walking the config (``secrets_in``), so a new secret is masked by being declared one.
Secret = Annotated[str, SECRET]

# Environment variables that override a secret in the file: variable -> dotted key.
SECRET_ENV = {
    "SUMMON_AS_TOKEN": "appservice.as_token",
    "SUMMON_HS_TOKEN": "appservice.hs_token",
    "SUMMON_DATABASE_DSN": "database.dsn",
    "SUMMON_DATABASE_DIRECT_DSN": "database.direct_dsn",
}


# A server name as it follows the colon in a user id: a host name or an IP literal, with an optional port.
_SERVER = r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Homeserver(_Strict):
    url: str = Field(pattern=r"^https?://")
    server_name: str = Field(min_length=1)


class Listen(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=29333, ge=1, le=65535)


class Appservice(_Strict):
    id: str = Field(default="summon", min_length=1)
    address: str = Field(pattern=r"^https?://")
    listen: Listen = Listen()
    as_token: Secret = Field(min_length=16)
    hs_token: Secret = Field(min_length=16)
    # The service's own user (for `!bots …`). Every bot's puppet is @<puppet_prefix><slug>.
    sender_localpart: str = "summon"
    # Synapse sends up to 100 events of up to 64 KiB each in one transaction.
    max_body_size: int = Field(default=16 * 1024 * 1024, ge=7 * 1024 * 1024)
    # Whose invites our users accept: `local` (people on our own server), `any`, or a list of servers (ours
    # is not implied). Any other invite is declined with the reason on the leave event.
    invites: Literal["local", "any"] | tuple[str, ...] = "local"
    # The service's own user as people see it (it answers `!help`, `!cancel`, `!bots …` and typos): its display
    # name, set at every start.
    display_name: str = Field(default="summon", min_length=1, max_length=100)
    # What every bot's puppet id starts with: @<puppet_prefix><slug>:<server> (the registration's user namespace
    # follows). Pick one no other appservice on the server uses. Rooms know the ids, so a deployment keeps the
    # prefix it started with: a start with another is refused.
    puppet_prefix: str = Field(default="bot_", pattern=r"^[a-z0-9._=/-]{1,32}$")
    # The service user's avatar: an mxc:// uri, or an image file under the content folder (PNG, JPEG, GIF, WebP;
    # uploaded once). None: one is drawn from the display name's initial.
    avatar: str | None = Field(default=None, min_length=1)

    @field_validator("avatar")
    @classmethod
    def _avatar(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_avatar(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("invites", mode="before")
    @classmethod
    def _invites(cls, value: object) -> object:
        # Checked here, whole, so a bad value is one plain line rather than an error per union member.
        if value in ("local", "any"):
            return value
        if not isinstance(value, list | tuple) or not value:
            raise ValueError("takes local, any, or a list of servers (e.g. [example.org])")
        for server in value:
            if not isinstance(server, str) or not re.fullmatch(_SERVER, server):
                raise ValueError(f"{server!r} is not a server name (the part after the colon in @alice:example.org)")
        return tuple(value)


class Limits(_Strict):
    # What the whole deployment may spend on model calls in any 24 hours, in USD (every run reserves its own
    # spend limit until it ends). None: no cap.
    daily_spend: float | None = Field(default=None, ge=0)
    # How many runs one person may have waiting or running at once; more are refused in words.
    live_runs_per_person: int = Field(default=3, ge=1, le=1000)
    # How many summonses may wait for one bot (for a worker's slot or a provider's permit); past it, new ones
    # are refused in words ("busy, try again in a minute") rather than queued for ten minutes.
    waiting_per_bot: int = Field(default=100, ge=1, le=100_000)

    def caps(self) -> Caps:
        return Caps(daily_spend=self.daily_spend, live_runs_per_person=self.live_runs_per_person,
                    waiting_per_bot=self.waiting_per_bot)


class Database(_Strict):
    dsn: str = Field(pattern=r"^postgres(ql)?://")
    pool_min: int = Field(default=2, ge=1)
    pool_max: int = Field(default=10, ge=2)
    # `dsn` goes through a pooler in transaction mode (PgBouncer): no statement is prepared by name.
    pooled: bool = False
    # A direct connection to PostgreSQL, not through the pooler, for what needs a session of its own: LISTEN
    # (workers and the outbox are woken through it) and migrations (a session lock). None: `dsn`.
    direct_dsn: str | None = Field(default=None, pattern=r"^postgres(ql)?://")

    def direct(self) -> str:
        return self.direct_dsn or self.dsn


class Worker(_Strict):
    # Runs this process works on at once. A slot holds no database connection while it awaits a model, so
    # slots are cheap: the default is sized for model calls that take seconds (engine/run/worker.py).
    slots: int = Field(default=DEFAULT_SLOTS, ge=0, le=10_000)
    budget_seconds: float = Field(default=60.0, gt=0)
    lease_seconds: float = Field(default=90.0, gt=0)
    sweep_seconds: float = Field(default=10.0, gt=0)
    poll_seconds: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)


class Content(_Strict):
    dir: str = "content"


# A site event's name as a key may be scoped to it: `site.purchase.paid`, or a prefix `site.support.*`
# (every event under it), or `site.*` (every site event).
_SCOPE = r"^site\.(\*|[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)*(\.\*)?)$"


# A room a key may post for: a room id (`!abc:example.org`), or `*` for any room.
ANY_ROOM = "*"
_ROOM_SCOPE = r"^(\*|![^:\s]+:\S+)$"


class HookKey(_Strict):
    # Shared with the site, which signs each post with it (HMAC-SHA256); `openssl rand -hex 32`.
    secret: Secret = Field(min_length=16)
    # The site events this key may post: at least one name or prefix.
    events: tuple[Annotated[str, Field(pattern=_SCOPE)], ...] = Field(min_length=1)
    # The rooms it may post for (a body's room_id): at least one room id, or `*` for any room — said
    # outright, so no key speaks in every room by being left unscoped.
    rooms: tuple[Annotated[str, Field(pattern=_ROOM_SCOPE)], ...] = Field(min_length=1)


class Hooks(_Strict):
    # Key id (sent as X-Summon-Key) -> its secret and the events it may post. None: no site events.
    keys: dict[str, HookKey] = Field(default_factory=dict)


class CodeToolLimits(_Strict):
    # Wall seconds a code tool's run may take (its process, and all it started, is killed then), and to load.
    seconds: float = Field(default=60.0, gt=0)
    load_seconds: float = Field(default=30.0, gt=0)
    # Processor seconds for its whole process; None: seconds + load_seconds.
    cpu_seconds: int | None = Field(default=None, ge=1)
    # Address space each of its processes may map, in MiB.
    memory_mb: int = Field(default=1024, ge=64)
    # How many processes it may run at once (its jail's uid is its own: they alone count).
    processes: int = Field(default=32, ge=1)
    # The service's environment variables a code tool is handed, by name; nothing else of the environment is.
    env: list[str] = Field(default_factory=list)

    @field_validator("env")
    @classmethod
    def _not_ours(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable's name")
            if name.upper().startswith(("SUMMON_", "AGENTS_")):
                raise ValueError(f"{name} is summon's own; a code tool is never handed it")
        return names


class Tools(_Strict):
    # The room `raise_ticket` tells the staff in (a room id, `!…:server`, the service user has joined).
    # None: tickets are still raised, and nobody is told in Matrix.
    staff_room: str | None = Field(default=None, pattern=r"^![^:]+:.+$")
    # The url prefixes the `fetch` tool may read (HTTPS only), e.g. https://example.org/docs/. Empty: none.
    fetch_allow: list[str] = Field(default_factory=list)
    # Secret headers for OpenAPI tools, by tool file name: {header: the environment variable holding its
    # value}. Secrets never live in content files or here; a variable that is not set stops the service.
    openapi_headers: dict[str, dict[str, str]] = Field(default_factory=dict)
    # What a code tool's process (content/tools/*.py, run out of the service's process) may take and is given.
    code: CodeToolLimits = CodeToolLimits()


class Door(_Strict):
    # Where the OpenAI-compatible door listens (POST /v1/chat/completions, GET /v1/models, the start route, the
    # session's room). None: no listener (a `summon worker` still hands door turns over).
    listen: Listen | None = None
    # Grant keys by id ({key id: secret}, each secret at least 32 characters): every one verifies, the one named
    # by `signing_key` signs. Rotate by adding a key, signing with it, and removing the old one 30 minutes later.
    keys: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")], Annotated[Secret, Field(min_length=32)]] = Field(
        min_length=1)
    signing_key: str
    # Which door a grant opens (a grant made for another audience is refused). None: summon-door:<server_name>.
    audience: str | None = Field(default=None, min_length=1, max_length=200)
    # How long a grant minted by the start route lives, in minutes (at most 30).
    minutes: float = Field(default=15.0, gt=0, le=30)
    # The largest request body taken, in bytes; a bigger one is refused (400, in OpenAI's error shape).
    max_body_size: int = Field(default=1024 * 1024, ge=4096, le=64 * 1024 * 1024)
    # How long a turn's response waits for its answer; then the work outlives the turn and its result is posted
    # to the session's room (re-checked) or the person's DM with the bot when it is done.
    wait_seconds: float = Field(default=120.0, gt=0, le=3600)
    # How often a streamed turn that is still working sends a keep-alive comment: well under the read timeouts
    # of voice front ends (LiveKit's client default is 5 s), so a slow answer never looks like a dead line.
    keepalive_seconds: float = Field(default=2.5, ge=0.1, le=30)
    # How long a room claim waits for the homeserver when our own state does not know both members; silence
    # is a refusal (the session stays on the person's DM).
    check_seconds: float = Field(default=3.0, gt=0, le=60)
    # Whether a person may mint a grant from their own Matrix access token (POST /v1/door/start).
    start: bool = True

    @field_validator("signing_key")
    @classmethod
    def _known(cls, value: str, info: ValidationInfo) -> str:
        if value not in (info.data.get("keys") or {}):
            raise ValueError("names no key in door.keys")
        return value

    def audience_for(self, server_name: str) -> str:
        return self.audience or f"summon-door:{server_name}"


# --- the desk (appservice/desk) ------------------------------------------------------------------------

DeskEvent = Literal["message_created", "message_updated", "conversation_opened", "conversation_resolved",
                   "conversation_status_changed"]
DESK_EVENTS: tuple[DeskEvent, ...] = ("message_created", "message_updated", "conversation_opened",
                                      "conversation_resolved", "conversation_status_changed")


class DeskListen(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=29380, ge=0, le=65535)  # 0: any free port (the tests)


class DeskWebhook(_Strict):
    # Where the desk posts its events, signed like Chatwoot's: X-Chatwoot-Signature: sha256=<hex
    # HMAC-SHA256(secret, "<X-Chatwoot-Timestamp>.<raw body>")>, X-Chatwoot-Delivery: <uuid, the same on retries>.
    url: str = Field(pattern=r"^https?://")
    secret: Secret = Field(min_length=16)
    events: tuple[DeskEvent, ...] = DESK_EVENTS
    # This receiver answers the contact (an agent bot, Chatwoot-style): a message it could not be handed
    # gives the conversation to people (open), as Chatwoot does.
    agent_bot: bool = False


_CLOCK = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class DeskOfficeHours(_Strict):
    # When a person answers this inbox: a time zone (IANA, e.g. Europe/Dublin), the days (mon … sun) and the
    # hours, opening and closing on the same day ("09:00", "17:30").
    timezone: str
    days: tuple[Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"], ...] = ("mon", "tue", "wed", "thu", "fri")
    opens: str = "09:00"
    closes: str = "17:00"

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not a time zone (an IANA name such as Europe/Dublin)") from None
        return value

    @field_validator("opens", "closes")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _CLOCK.match(value):
            raise ValueError(f"{value!r} is not a time of day (HH:MM, 24-hour)")
        return value

    @model_validator(mode="after")
    def _order(self) -> DeskOfficeHours:
        if not self.days:
            raise ValueError("days: at least one day")
        if self.closes <= self.opens:
            raise ValueError(f"closes ({self.closes}) must come after opens ({self.opens}) on the same day")
        return self


class DeskInbox(_Strict):
    # The public id a widget names (letters, digits, - and _); default: the inbox's key in desk.inboxes.
    identifier: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    # What people are shown (the widget's title, the staff room's threads).
    title: str = Field(min_length=1, max_length=200)
    # The staff API's key for this inbox (header api_access_token); `openssl rand -hex 32`.
    staff_key: Secret = Field(min_length=16)
    # Signs a signed-in contact's account id for this inbox until a moment (identifier_token = v1.<expires>.<hex
    # HMAC-SHA256(identity_secret, "v1.<inbox identifier>.<identifier>.<expires>")>; docs/desk.md "Tokens").
    # None: every contact is a guest.
    identity_secret: Annotated[str | None, SECRET] = Field(default=None, min_length=16)
    # The desk bots that work this inbox, by slug; None: every bot on the desk.
    bots: tuple[str, ...] | None = None
    webhooks: tuple[DeskWebhook, ...] = ()
    # What the runs started from this inbox (asked or heard) may spend in any 24 hours, in USD; every run
    # reserves its own spend limit against it until it ends. A public inbox needs it or limits.daily_spend:
    # `summon serve` refuses to start without one (each new contact is a new spender, under no ceiling yet).
    daily_spend: float | None = Field(default=None, ge=0)
    # How many contacts may be made in this inbox in an hour, from every address together; more are refused.
    contacts_per_hour: int = Field(default=500, ge=1)
    # Also accept the static identifier_hash (an HMAC of the identifier alone, which signs that account in for
    # good once seen): a compatibility path for sites not yet sending identifier_token, logged on each use.
    identity_static_hash: bool = False
    # Who answers what is handed to people (Matrix ids of the staff, in the staff room): inside office_hours one
    # of those present (Matrix presence online) is assigned, round-robin, and pinged in the staff thread; outside
    # them, or with nobody present, the contact is told when a person will answer. None listed: nobody is assigned.
    staff: tuple[Annotated[str, Field(pattern=r"^@[^:\s]+:\S+$")], ...] = ()
    # None: always open (a handoff is assigned whenever somebody is present).
    office_hours: DeskOfficeHours | None = None


class Desk(_Strict):
    # The desk's own listener: the widget (/desk/widget), its public API and the staff API.
    listen: DeskListen = DeskListen()
    # Signs contacts' tokens; `openssl rand -hex 32`. Changing it signs every contact out.
    secret: Secret = Field(min_length=32)
    # How long a contact's token holds, in days.
    token_days: float = Field(default=30.0, gt=0)
    # How many messages one contact may write in a minute, over all their conversations; more are refused.
    messages_per_minute: int = Field(default=20, ge=1)
    # Minutes a bot's answer may stand unanswered before the conversation is resolved as assumed.
    idle_minutes: float = Field(default=30.0, gt=0)
    # Whether a bot handing a conversation to people writes the summary at the top of it (a bot's own
    # handoff_summary: says otherwise for that bot).
    handoff_summary: bool = True
    # The Matrix room (a room id the service user has joined) where each conversation is mirrored as a thread.
    # Room version 12 ids have no server part (!opaque), earlier ones do (!opaque:server).
    staff_room: str | None = Field(default=None, pattern=r"^![^:\s]+(:\S+)?$")
    # The account id in the staff API's paths (/api/v1/accounts/<id>/…).
    account_id: int = Field(default=1, ge=1)
    # Origins (scheme://host[:port]) of sites that embed the widget from elsewhere; the public API answers
    # them (CORS). Empty: only pages the desk serves itself.
    origins: tuple[Annotated[str, Field(pattern=r"^https?://[^/]+$")], ...] = ()
    inboxes: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")], DeskInbox] = Field(min_length=1)
    # The proxies the desk sits behind (addresses or networks): a call from one of them is from the last address
    # in its X-Forwarded-For that is none of them. Empty: a call is from the address it comes from.
    trusted_proxies: tuple[IPvAnyNetwork, ...] = ()
    # How many contacts one client address may make in an hour (in every inbox), and how many conversations it
    # may start; more are refused (429, in the site's words).
    contacts_per_address_hour: int = Field(default=20, ge=1)
    conversations_per_address_hour: int = Field(default=30, ge=1)
    # How many conversations one contact may hold: those still open or pending and those started in the last
    # 24 hours, together.
    conversations_per_contact: int = Field(default=20, ge=1)
    # Guests (no account) not heard from in this many days, with nothing open and no ticket, are deleted with
    # their conversations.
    guests_kept_days: float = Field(default=30.0, gt=0)
    # Earlier values of `secret`: contacts' tokens they signed still verify (rotate: the new one in `secret`, the
    # old one here until token_days have passed), none signs.
    old_secrets: tuple[Secret, ...] = ()
    # How long a contact's chain of tokens may be renewed, in days from its first: past it, the contact starts over.
    token_max_days: float = Field(default=90.0, gt=0)
    # Event streams one contact may hold open at once, and the whole process; past either, 429.
    streams_per_contact: int = Field(default=4, ge=1)
    streams_per_process: int = Field(default=1000, ge=1)

    @model_validator(mode="after")
    def _one_inbox_per_identifier(self) -> Desk:
        seen: dict[str, str] = {}
        for name, inbox in self.inboxes.items():
            identifier = inbox.identifier or name
            if identifier in seen:
                raise ValueError(f"inboxes {seen[identifier]} and {name} have the same identifier {identifier!r}")
            seen[identifier] = name
        return self


class Members(_Strict):
    """Member bots (docs/member-bots.md): charters people make by asking the builder in a DM."""

    # The instance keys charters are sealed under, "<id>:<base64 of 32 bytes>"; the first seals, every one
    # unseals. Put a new key first and run `summon keys rotate` to re-seal. SUMMON_MEMBER_KEYS (comma-separated)
    # wins over this list.
    keys: list[Secret] = Field(min_length=1)
    # The shortest interval a member bot may run at, in seconds (15 minutes). Lower it only for tests and demos.
    min_every_seconds: int = Field(default=900, ge=1)
    # Server admins: they may remove anyone's member bot (without reading it).
    admins: list[str] = Field(default_factory=list)
    # How many member bots one person may keep.
    max_per_person: int = Field(default=10, ge=1, le=100)
    # The bot that builds and hosts member bots (a site's bot extending the kit's `builder`), by slug.
    builder: str = Field(default="builder", min_length=1)
    # How often the member bots' clock is looked at, in seconds.
    tick_seconds: float = Field(default=60.0, gt=0)
    # How long a new bot's dry run may take before nothing is made. A dry run is a run of its own: the
    # builder's run waits for it, so give the workers at least two slots.
    dry_run_seconds: float = Field(default=180.0, gt=0)
    # Tests only: a member bot may read feeds over plain http on 127.0.0.1 / ::1. Never in production.
    loopback_feeds_for_tests: bool = False

    @field_validator("keys")
    @classmethod
    def _keys(cls, keys: list[str]) -> list[str]:
        parse_keys(keys)
        return keys

    @field_validator("admins")
    @classmethod
    def _admins(cls, admins: list[str]) -> list[str]:
        for admin in admins:
            if not re.fullmatch(r"@[^:\s]+:\S+", admin):
                raise ValueError(f"{admin!r} is not a Matrix user id (@name:server)")
        return admins


class Logging(_Strict):
    # `text`: a line a person reads, what it is about (run, bot, room …) at its end; `json`: one object a
    # line, for a log pipeline. Secrets are never written in either.
    format: Literal["text", "json"] = "text"


class MetricsListen(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(ge=1, le=65535)


class Metrics(_Strict):
    # Where /metrics (Prometheus's text format) is served, on a listener of its own; None: not served. Each
    # process that should be scraped needs a port of its own (`summon worker` beside `summon serve`).
    listen: MetricsListen | None = None


class Speech(_Strict):
    """Voice notes heard and answers said (SPEC §12). The endpoints and their keys are the environment's
    (SUMMON_STT_URL/_KEY/_MODEL, SUMMON_TTS_URL/_KEY/_MODEL/_VOICE); called only when buying is on (AGENTS_LIVE=1)."""

    # A voice note larger than this (MiB) or longer than this (seconds) is answered in words, not heard.
    max_mib: float = Field(default=20.0, gt=0, le=200)
    max_seconds: float = Field(default=600.0, gt=0, le=7200)
    # How long one transcription or speech call may take (hearing a voice note is a room action, given up and
    # tried again after 45 s: the fetch and the call must fit in that).
    timeout_seconds: float = Field(default=30.0, gt=0, le=40)
    # After the speech endpoint fails, answers go out as text only for this long (then it is tried again).
    fallen_seconds: float = Field(default=600.0, ge=0, le=86400)
    # Voice notes one process fetches and hears at once (each holds up to max_mib while it is heard); a note that
    # waits more than a few seconds for one is answered in words (busy), not queued out of sight.
    hearings_at_once: int = Field(default=4, ge=1, le=64)
    # Voice notes one sender may have heard in any minute, counted across every process; more are answered in words.
    hearings_per_minute: int = Field(default=6, ge=1, le=600)
    # What a note that cannot be measured (not Ogg Opus, not a PCM WAV) is taken to play for: its bytes over this
    # bit-rate (kbit/s). 6 is Opus's floor for speech, below what any client records a voice note at.
    floor_kbps: float = Field(default=6.0, gt=0, le=1536)


class Memory(_Strict):
    """memory: person+recall (SPEC §11). The defaults are chosen on tests/memory/recall_pairs.yaml (docs/content.md)."""

    # A memory further than this (cosine distance) from what is asked is not recalled: nothing beats the unrelated.
    recall_floor: float = Field(default=0.215, gt=0, le=2)
    # At most this many memories are recalled for a run.
    recall_count: int = Field(default=5, ge=1, le=50)
    # Threads the embedding model uses (it runs off the event loop, in a thread of its own).
    embed_threads: int = Field(default=1, ge=1, le=16)


class SocialBridge(_Strict):
    # A bridge whose puppets are guests (SPEC §14): its users' ids match this pattern (a regex over the whole id,
    # as a registration's namespace is written, e.g. "@instagram_.*:example.org"). A room with one of them in it
    # is bridged even without m.bridge state; a line from one of them is a guest's, never one of our people's.
    users: str = Field(min_length=1, max_length=255)
    # What the platform is called where a label names it ("visible to everyone on Instagram"), when the room's
    # m.bridge state does not say.
    network: str | None = Field(default=None, min_length=1, max_length=64)

    @field_validator("users")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value


class Social(_Strict):
    # The Matrix room (the service user has joined it) where drafts wait for review, a thread per conversation.
    staff_room: str = Field(pattern=r"^![^:\s]+(:\S+)?$")
    # The power level, in the bridged room, that writes, changes and sends a rule's replies (50: a moderator).
    power: int = Field(default=50, ge=0)
    bridges: tuple[SocialBridge, ...] = ()
    # What a rule's bot is given besides the triggering line: at most this many earlier lines of that same
    # conversation, within this many characters.
    history_lines: int = Field(default=20, ge=0, le=200)
    history_chars: int = Field(default=4000, ge=200, le=24_000)
    # The most drafts one rule makes in an hour; more lines that match wait for nobody (recorded, not drafted).
    drafts_per_hour: int = Field(default=20, ge=1, le=1000)
    # The most of a guest's line a bot is given (untrusted input is bounded).
    line_chars: int = Field(default=2000, ge=100, le=20_000)


class Config(_Strict):
    homeserver: Homeserver
    appservice: Appservice
    database: Database
    worker: Worker = Worker()
    content: Content = Content()
    hooks: Hooks = Hooks()
    tools: Tools = Tools()
    limits: Limits = Limits()
    door: Door | None = None
    desk: Desk | None = None  # off unless configured
    logging: Logging = Logging()
    metrics: Metrics = Metrics()
    speech: Speech = Field(default_factory=lambda: Speech())
    memory: Memory = Field(default_factory=lambda: Memory())
    members: Members | None = None  # member bots: off unless configured
    social: Social | None = None  # rules for bridged social rooms: off unless configured


def parse_config(raw: Mapping[str, Any], env: Mapping[str, str]) -> Config:
    data = _with_env(raw, env)
    if env.get("SUMMON_MEMBER_KEYS"):
        current = data.get("members")
        keys = [k.strip() for k in env["SUMMON_MEMBER_KEYS"].split(",") if k.strip()]
        data["members"] = {**(current if isinstance(current, dict) else {}), "keys": keys}
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"config: {key}: {err['msg']}") from None
    openapi_headers(config, env)  # every secret a tool needs is there, or the service does not start
    plain = [prefix for prefix in config.tools.fetch_allow if not prefix.lower().startswith("https://")]
    if plain:
        raise ConfigError(f"config: tools.fetch_allow: fetch reads HTTPS only, not {plain[0]!r}")
    try:
        make_get(FetchSettings(allow=tuple(config.tools.fetch_allow)))
    except ValueError as exc:
        raise ConfigError(f"config: tools.fetch_allow: {exc}") from None
    return config


def code_sandbox(config: Config, env: Mapping[str, str]) -> Sandbox:
    """How a code tool's process is made, from ``tools.code``: its limits, and the values in ``env`` (the
    service's environment) of the variables it names — read here, at the root, never in the engine."""
    c = config.tools.code
    return Sandbox(CodeLimits(seconds=c.seconds, load_seconds=c.load_seconds, cpu_seconds=c.cpu_seconds,
                              memory_bytes=c.memory_mb * 1024 * 1024, processes=c.processes), tuple(c.env),
                   {name: env[name] for name in c.env if name in env})


def openapi_headers(config: Config, env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The OpenAPI tools' secret headers, read from the environment variables the config names."""
    out: dict[str, dict[str, str]] = {}
    for tool, headers in config.tools.openapi_headers.items():
        for header, variable in headers.items():
            value = env.get(variable)
            if not value:
                raise ConfigError(f"config: tools.openapi_headers.{tool}.{header}: the environment variable "
                                  f"{variable} is not set")
            out.setdefault(tool, {})[header] = value
    return out


# --- what the environment says -----------------------------------------------------------------------------
#
# The providers, the buying switch and the speech endpoints are set in the environment, and read here, at the
# root: the engine is handed typed settings and reads no environment.
#
# SUMMON_PROVIDERS=openrouter,anthropic          the providers, in the order they are tried
# SUMMON_PROVIDER_<NAME>_KIND=openai|anthropic   the wire shape (default: anthropic for a provider
#                                                named "anthropic", openai for any other)
# SUMMON_PROVIDER_<NAME>_URL=https://…           base url (default: the kind's official one)
# SUMMON_PROVIDER_<NAME>_KEY=…                   the key; a provider without one is never called
# SUMMON_PROVIDER_<NAME>_MODEL=…                 the model for a bot that names none (optional)
# SUMMON_PROVIDER_<NAME>_TIMEOUT=120             seconds for one call (optional)
# SUMMON_PROVIDER_<NAME>_FREE=1                  every model on it costs nothing (a local model: llama.cpp,
#                                                Ollama, vLLM): priced 0 with no price file, and no key needed
# SUMMON_PROVIDER_<NAME>_MAX_IN_FLIGHT=20        calls to it at once, all workers together (optional)
# SUMMON_PROVIDER_<NAME>_RPM=500                 requests per minute, all workers together (optional)
# SUMMON_PROVIDER_<NAME>_TPM=200000              tokens per minute (prompt estimate + max_tokens), likewise
# SUMMON_PROVIDER_<NAME>_WINDOW=60               seconds RPM and TPM are counted over, each window its share
#                                                (a provider that enforces per-minute limits per 10 s: 10)
# SUMMON_PRICES=/path/prices.yaml                the deployment's prices, over the kit's
# AGENTS_LIVE=1                                  switch buying on
# SUMMON_AGENT_MOCK=1                            answer through the stand-in, whatever else is set
#
#
# <NAME> is the name upper-cased, with anything but letters and digits as ``_`` (``env_prefix``).
#
#     SUMMON_STT_URL   the speech endpoint that hears: the base (…/v1) or the transcriptions path outright; _KEY,
#                      _MODEL (whisper-1), _USD_PER_MINUTE
#     SUMMON_TTS_URL   the one that says: the base (…/v1) or the speech path outright; _KEY, _MODEL (tts-1),
#                      _VOICE (alloy), _USD_PER_MILLION_CHARS

_PROVIDER_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_YES = frozenset({"1", "true", "yes", "on"})


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() in _YES


def provider_settings(env: Mapping[str, str]) -> ProviderSettings:
    """What answers model calls, from the environment. A bad setting is a ``ConfigError`` naming its key."""
    return ProviderSettings(tuple(providers_from_env(env)), mock=_yes(env.get("SUMMON_AGENT_MOCK")),
                            live=_yes(env.get("AGENTS_LIVE")), prices=env.get("SUMMON_PRICES") or None)


def providers_from_env(env: Mapping[str, str]) -> list[ProviderConfig]:
    """The configured providers, in order. A bad setting is a ``ConfigError`` naming its key."""
    listed = [n.strip().lower() for n in env.get("SUMMON_PROVIDERS", "").split(",") if n.strip()]
    out: list[ProviderConfig] = []
    seen: set[str] = set()
    for name in listed:
        if not _PROVIDER_NAME.match(name):
            raise ConfigError(f"SUMMON_PROVIDERS: {name!r} is not a provider name (letters, digits, '_', '-', '.')")
        prefix = env_prefix(name)
        if prefix in seen:
            raise ConfigError(f"SUMMON_PROVIDERS: {name!r} is listed twice (or two names share {prefix}*)")
        seen.add(prefix)
        kind = env.get(prefix + "KIND", "").strip().lower() or ("anthropic" if name == "anthropic" else "openai")
        if kind not in KINDS:
            raise ConfigError(f"{prefix}KIND: {kind!r} is not one of {', '.join(KINDS)}")
        url = env.get(prefix + "URL", "").strip() or None
        if url is not None and not url.startswith(("http://", "https://")):
            raise ConfigError(f"{prefix}URL: {url!r} is not an http(s) url")
        raw_timeout = env.get(prefix + "TIMEOUT", "").strip()
        try:
            timeout = float(raw_timeout) if raw_timeout else DEFAULT_TIMEOUT
        except ValueError:
            raise ConfigError(f"{prefix}TIMEOUT: {raw_timeout!r} is not a number of seconds") from None
        if not 0 < timeout <= 600:
            raise ConfigError(f"{prefix}TIMEOUT: {raw_timeout!r} is not between 0 and 600 seconds")
        raw_free = env.get(prefix + "FREE", "").strip().lower()
        if raw_free not in ("", "0", "false", "no", "off") and raw_free not in _YES:
            raise ConfigError(f"{prefix}FREE: {raw_free!r} is not 1 or 0")
        free = raw_free in _YES
        # A local model wants no key; its SDK wants a string, which it never checks.
        key = env.get(prefix + "KEY", "").strip() or ("no-key-needed" if free else None)
        out.append(ProviderConfig(
            name=name, kind="anthropic" if kind == "anthropic" else "openai", url=url, key=key,
            model=env.get(prefix + "MODEL", "").strip() or None,
            timeout=timeout, limits=limits_from_env(env, prefix), free=free,
        ))
    return out


def limits_from_env(env: Mapping[str, str], prefix: str) -> ProviderLimits:
    """A provider's limits (every worker keeps them together); a bad one is a ``ConfigError`` naming its key."""

    def count(suffix: str) -> int | None:
        raw = env.get(prefix + suffix, "").strip()
        if not raw:
            return None
        if not raw.isdecimal() or int(raw) < 1:
            raise ConfigError(f"{prefix}{suffix}: {raw!r} is not a whole number of at least 1")
        return int(raw)

    raw_window = env.get(prefix + "WINDOW", "").strip()
    try:
        window = float(raw_window) if raw_window else 60.0
    except ValueError:
        raise ConfigError(f"{prefix}WINDOW: {raw_window!r} is not a number of seconds") from None
    if not 1 <= window <= 60:
        raise ConfigError(f"{prefix}WINDOW: {raw_window!r} is not between 1 and 60 seconds")
    return ProviderLimits(max_in_flight=count("MAX_IN_FLIGHT"), requests_per_minute=count("RPM"),
                          tokens_per_minute=count("TPM"), window_seconds=window)


def speech_from_env(env: Mapping[str, str]) -> SpeechSettings:
    """The speech endpoints' settings (SPEC §12), from ``SUMMON_STT_*`` and ``SUMMON_TTS_*``."""

    def get(name: str) -> str | None:
        return env.get(name, "").strip() or None

    def price(name: str, default: float) -> float:
        raw = get(name)
        try:
            return float(raw) if raw is not None else default
        except ValueError:
            log.warning("%s is not a number (%r); using %s", name, raw, default)
            return default

    return SpeechSettings(
        stt_url=get("SUMMON_STT_URL"), stt_key=get("SUMMON_STT_KEY"), stt_model=get("SUMMON_STT_MODEL") or "whisper-1",
        tts_url=get("SUMMON_TTS_URL"), tts_key=get("SUMMON_TTS_KEY"), tts_model=get("SUMMON_TTS_MODEL") or "tts-1",
        tts_voice=get("SUMMON_TTS_VOICE") or "alloy", live=_yes(env.get("AGENTS_LIVE")),
        stt_usd_per_minute=price("SUMMON_STT_USD_PER_MINUTE", STT_USD_PER_MINUTE),
        tts_usd_per_million_chars=price("SUMMON_TTS_USD_PER_MILLION_CHARS", TTS_USD_PER_MILLION_CHARS),
    )


def load_config(path: Path, env: Mapping[str, str]) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config: {path}{where}: not valid YAML") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config: {path}: the top level must be a mapping of sections")
    return parse_config(raw, env)


def _with_env(raw: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in raw.items()}
    for var, dotted in SECRET_ENV.items():
        if env.get(var):
            section, key = dotted.split(".")
            current = data.get(section)
            data[section] = {**(current if isinstance(current, dict) else {}), key: env[var]}
    return data


def registration(config: Config) -> dict[str, Any]:
    """The appservice registration Synapse loads (`summon registration` writes it)."""
    server = config.homeserver.server_name.replace(".", r"\.")
    return {
        "id": config.appservice.id,
        "url": config.appservice.address,
        "as_token": config.appservice.as_token,
        "hs_token": config.appservice.hs_token,
        "sender_localpart": config.appservice.sender_localpart,
        "namespaces": {
            "users": [
                {"exclusive": True, "regex": f"@{re.escape(config.appservice.puppet_prefix)}.*:{server}"},
                {"exclusive": True, "regex": f"@{config.appservice.sender_localpart}:{server}"},
            ],
            "rooms": [],
            "aliases": [],
        },
        "rate_limited": False,
        "receive_ephemeral": True,
    }
