"""``summon status``: one screen of health, and an exit code a script or a probe can read.

Each line is a part that can be down — the database, the homeserver, the appservice as the homeserver
reaches it (the homeserver's own ping of ``summon serve``), the workers' heartbeats, whether any of them can
answer model calls — then what waits: the queue of runs and the outbox (and, with ``social:``, the bridged rooms and
their rules). Exit 0 when every part is up, 1
when any is down (the queue and the outbox inform; the /metrics alerts watch how they grow).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp

from appservice.config import Config
from appservice.database import open_store
from appservice.social.tables import SocialTables
from engine.errors import StoreError
from engine.run.summon import LIVENESS_SECONDS
from engine.store import Store
from engine.store.health import Snapshot

TIMEOUT = 5.0


@dataclass(frozen=True)
class Line:
    part: str
    up: bool | None  # None: informs, cannot be down
    says: str


def shown_dsn(dsn: str) -> str:
    """The DSN without its password: a status screen is pasted into chats and tickets."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ""
    netloc = f"{user}{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


async def _database(config: Config) -> tuple[Line, Snapshot | None, list[Line]]:
    where = shown_dsn(config.database.dsn)
    try:
        store = await asyncio.wait_for(open_store(config.database, min_size=1, max_size=1), TIMEOUT)
    except (StoreError, TimeoutError) as exc:
        return Line("database", False, f"{where}: {exc or 'no answer within 5 s'}"), None, []
    try:
        snapshot = await store.health.snapshot(LIVENESS_SECONDS)
        social = [await _social(store)] if config.social is not None else []
    except StoreError as exc:
        return Line("database", False, f"{where}: {exc}"), None, []
    finally:
        await store.close()
    return Line("database", True, where), snapshot, social


async def _social(store: Store) -> Line:
    """How many rooms are bridged and how many rules there are (docs/social.md): informs, cannot be down."""
    counts = await store.of(SocialTables).counts()
    return Line("social", None, f"{counts.rooms} bridged room(s), {counts.active} rule(s) live, "
                                f"{counts.paused} paused")


async def _homeserver(config: Config, http: aiohttp.ClientSession) -> list[Line]:
    base = config.homeserver.url.rstrip("/")
    try:
        async with http.get(f"{base}/_matrix/client/versions") as resp:
            if resp.status != 200:
                return [Line("homeserver", False, f"{base}: HTTP {resp.status}"),
                        Line("appservice", False, "not asked (the homeserver is down)")]
    except (aiohttp.ClientError, TimeoutError) as exc:
        return [Line("homeserver", False, f"{base}: unreachable ({type(exc).__name__})"),
                Line("appservice", False, "not asked (the homeserver is down)")]
    # The homeserver pings summon's appservice endpoint with hs_token: proves the registration is loaded,
    # the tokens agree and `summon serve` answers at `appservice.address`.
    ping = f"{base}/_matrix/client/v1/appservice/{quote(config.appservice.id, safe='')}/ping"
    headers = {"Authorization": f"Bearer {config.appservice.as_token}"}
    started = time.monotonic()
    try:
        async with http.post(ping, json={"transaction_id": f"status-{uuid.uuid4().hex}"}, headers=headers) as resp:
            body = await resp.json(content_type=None)
            took = (time.monotonic() - started) * 1000
            if resp.status == 200:
                return [Line("homeserver", True, base),
                        Line("appservice", True, f"the homeserver reached summon at {config.appservice.address} "
                                                 f"({took:.0f} ms)")]
            said = body.get("errcode", "") if isinstance(body, dict) else ""
            why = {"M_CONNECTION_FAILED": "the homeserver could not reach summon (is `summon serve` running?)",
                   "M_CONNECTION_TIMEOUT": "summon did not answer the homeserver in time",
                   "M_FORBIDDEN": "the homeserver does not know this appservice (is registration.yaml loaded?)",
                   "M_UNKNOWN_TOKEN": "the homeserver does not know as_token (is registration.yaml loaded?)",
                   "M_BAD_STATUS": "summon refused the homeserver's ping (do the hs_tokens agree?)",
                   }.get(said, f"HTTP {resp.status} {said}".strip())
            return [Line("homeserver", True, base), Line("appservice", False, why)]
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return [Line("homeserver", True, base), Line("appservice", False, f"ping failed ({type(exc).__name__})")]


def _work(snapshot: Snapshot | None) -> list[Line]:
    if snapshot is None:
        return [Line("workers", False, "unknown (no database)"), Line("providers", False, "unknown (no database)")]
    s = snapshot
    workers = Line("workers", s.workers_alive > 0,
                   f"{s.workers_alive} beating" if s.workers_alive else
                   f"none has beaten in the last {LIVENESS_SECONDS:.0f} s (start `summon serve` or `summon worker`)")
    providers = Line("providers", s.workers_usable > 0,
                     f"{s.workers_usable} worker(s) can answer ({s.provider_mode})" if s.workers_usable else
                     f"nothing can answer model calls ({s.provider_mode or 'no worker'}): mentions are refused")
    queue = Line("queue", None, f"{s.queued} waiting (oldest {age(s.oldest_queued_seconds)}), {s.running} running")
    outbox = Line("outbox", None, f"{s.outbox_pending} unsent (oldest {age(s.oldest_unsent_seconds)})")
    return [workers, providers, queue, outbox]


async def status(config: Config) -> list[Line]:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        (db, snapshot, social), matrix = await asyncio.gather(_database(config), _homeserver(config, http))
    return [db, *matrix, *_work(snapshot), *social]


def render(lines: list[Line]) -> str:
    mark = {True: "ok", False: "DOWN", None: ""}
    return "\n".join(f"{line.part:<11} {mark[line.up]:<5} {line.says}" for line in lines)


def healthy(lines: list[Line]) -> bool:
    return all(line.up is not False for line in lines)
