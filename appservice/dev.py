"""``summon dev`` and ``summon say``: the whole thing on one machine, for a newcomer.

``dev`` brings up a throwaway PostgreSQL and Synapse (synapse-dev/up), publishes content/, runs the
service on the mock model, seeds a demo user and a room with the demo bots, serves the desk's widget (its
conversations mirrored into the demo user's "desk staff" room), bridges a DM by a fake social bridge (its drafts
reviewed in "social review"), and says how to log in.
``say`` speaks as that demo user and prints the bot's answer, for anyone without a Matrix client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from mautrix.api import HTTPAPI, Method
from mautrix.api import Path as MxPath
from mautrix.client import ClientAPI
from mautrix.errors import MatrixRequestError
from mautrix.types import (
    EventType,
    MessageType,
    PaginationDirection,
    RoomID,
    TextMessageEventContent,
    UserID,
)

from appservice.config import (
    Config,
    Desk,
    Door,
    Listen,
    Members,
    Social,
    SocialBridge,
    load_config,
    provider_settings,
)
from appservice.logs import configure, secrets_of
from appservice.matrix.outbox import TXN_MARKER
from appservice.members.seal import new_key
from appservice.social import demo_bridge
from appservice.stand_in import demo_book, demo_entries, member_bots_book
from engine.clock import SystemClock
from engine.providers.config import stand_in_reason
from engine.providers.mock import first_of

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
TOPIC = ("Mention a bot: @Helper hello · @Helper search the docs · @Helper which should I pick? · "
         "@Helper take it slow · !summarise")
DEMO_USER = "demo"
DEMO_PASSWORD = "demo"


def run_dir() -> Path:
    return Path(os.environ.get("SUMMON_RUN_DIR") or REPO / ".dev" / "run")


def read_env(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key:
            env[key.strip()] = value.strip()
    return env


async def register_or_login(hs_url: str, username: str, password: str) -> ClientAPI:
    """A person's account on the dev homeserver (open registration, so no shared secret is needed)."""
    api = HTTPAPI(base_url=hs_url)
    try:
        resp = await api.request(Method.POST, MxPath.v3.register, {
            "username": username, "password": password, "auth": {"type": "m.login.dummy"},
            "inhibit_login": False,
        })
        token, user_id = resp["access_token"], resp["user_id"]
    except MatrixRequestError as exc:
        if exc.errcode != "M_USER_IN_USE":
            raise
        resp = await api.request(Method.POST, MxPath.v3.login, {
            "type": "m.login.password", "identifier": {"type": "m.id.user", "user": username},
            "password": password,
        })
        token, user_id = resp["access_token"], resp["user_id"]
    finally:
        await api.session.close()
    return ClientAPI(UserID(user_id), base_url=hs_url, token=token)


async def dev(*, verbose: bool = False) -> int:
    from appservice.app import Service

    stack_up = REPO / "synapse-dev" / "up"
    if not stack_up.exists():
        # The throwaway stack's scripts live in the repository, not in the wheel: an installed summon serves.
        sys.stderr.write(f"summon dev runs from a checkout of summon only ({stack_up} is not here): clone the "
                         "repository and run make dev, or configure summon.yaml and run summon serve\n")
        return 1
    # The demo's fake social bridge (docs/social.md), registered with Synapse from its start.
    bridge_file, bridge_env = demo_bridge.write_registration(REPO / ".dev" / "fakebridge",
                                                             os.environ.get("SUMMON_SERVER_NAME", "localhost"))
    extra = " ".join(filter(None, (os.environ.get("SUMMON_EXTRA_REGISTRATIONS"), str(bridge_file))))
    up = subprocess.run([str(stack_up)], capture_output=True, text=True,
                        env={**os.environ, "SUMMON_EXTRA_REGISTRATIONS": extra})
    if up.returncode != 0:
        sys.stderr.write(up.stderr)
        return 1
    env = read_env(Path(up.stdout.strip().splitlines()[-1]))
    os.environ.update(env)
    if stand_in_reason(provider_settings(os.environ)) is not None:
        # The demo chooses the stand-in unless a provider is configured and switched on: without that choice
        # no bot would answer (no provider, no bots), and the stand-in says what it is.
        os.environ["SUMMON_AGENT_MOCK"] = "1"
    config = with_members(with_door(load_config(Path(env["SUMMON_CONFIG"]), os.environ)))
    configure(config.logging.format, verbose=verbose, secrets=secrets_of(config, os.environ))
    # The demo user first: the desk's staff room is theirs, made before the service starts (it accepts the
    # invite when it comes up).
    client = await register_or_login(env["SUMMON_HS_URL"], DEMO_USER, DEMO_PASSWORD)
    config = await with_social(await with_desk(config, client), client)
    remember_desk(Path(env["SUMMON_CONFIG"]), config)
    # The demo shows the machine: its shipped book makes the stand-in call a tool, offer choices, take a slow
    # step and answer a command, and, when the stand-in answers everything else too, write member bots'
    # editions and drive the builder; `summon serve` never reads it.
    book = demo_book(demo_entries(), demo_user=client.mxid, commands=lambda: service.registry().commands)
    if stand_in_reason(provider_settings(os.environ)) == "chosen":
        book = first_of(book, member_bots_book)
    service: Service = Service(config, stand_in=book)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, service.stop_event.set)
    try:
        await service.start()
        puppets = [UserID(b.user_id) for b in service.registry().bots.values() if "rooms" in b.surfaces]
        # The service's own user too: it answers what is no bot's (`!help`, `!cancel`, a typo, `!bots …`).
        room_id = await client.create_room(name="summon demo", topic=TOPIC,
                                           invitees=[*puppets, UserID(service.service_user)])
        social = await social_demo(env, bridge_env, client, service.service_user)
        (run_dir() / "demo.json").write_text(json.dumps({
            "hs_url": env["SUMMON_HS_URL"], "user_id": client.mxid, "token": client.api.token,
            "room_id": room_id, "door_url": door_url(config), "social": social,
        }), encoding="utf-8")
        names = ", ".join(b.name for b in service.registry().bots.values() if "rooms" in b.surfaces)
        builder = service.registry().get(config.members.builder) if config.members is not None else None
        builder_line = ""
        if builder is not None:
            await client.create_room(name=f"{builder.name} (DM)", topic="Ask for a scheduled bot: docs/member-bots.md",
                                     invitees=[UserID(builder.user_id)])
            builder_line = ('\n  Member bots: in the "Builder (DM)" room say: make me a news digest every 2 minutes from '
                            "rte.ie\n               (docs/member-bots.md; a room named after the bot appears)")
        desk = service.desk
        assert desk is not None and config.desk is not None
        inbox = next(iter(config.desk.inboxes.values()))
        model = ("the stand-in model (SUMMON_AGENT_MOCK=1)" if service.answerer.stand_in is not None
                 else "a real provider (AGENTS_LIVE=1): every answer is bought")
        print(f"""
summon is running on {model}.

  Homeserver:  {env['SUMMON_HS_URL']}  (point any Matrix client at it)
  Log in as:   {DEMO_USER} / {DEMO_PASSWORD}
  Room:        "summon demo" ({room_id}), with {names}
  Try:         @Helper hello                     (the stand-in says what it is)
               @Helper search the docs           (a tool call: search_site)
               @Helper which should I pick?      (choices: press a keycap)
               @Helper take it slow              (a slow step: the progress line)
               !summarise                        (a command)
  From a terminal:  .venv/bin/summon say "@Helper hello"    .venv/bin/summon runs    .venv/bin/summon status
  The door:    {door_url(config)}  (OpenAI-compatible; docs/door.md has a runnable example)
  Desk widget: {desk.address}/desk/widget  (its conversations are threads in the "desk staff" room;
               staff API key for /api/v1/accounts/1/…: {inbox.staff_key})
  Desk figures: {desk.address}/desk/staff/report, or
               .venv/bin/summon desk report --key {inbox.staff_key}{builder_line}
  Social:      in "Fakebook DM with Alex" (bridged by a fake bridge) say
               !rules add replier "where is my refund" on dm to private
               then make Alex speak:  .venv/bin/summon say --guest "Hi, where is my refund?"
               and press ✅ on the draft in "social review" (docs/social.md)

Ctrl-C stops summon, Synapse and PostgreSQL.
""", flush=True)
        await service.stop_event.wait()
    finally:
        await client.api.session.close()
        await service.stop()
        subprocess.run([str(REPO / "synapse-dev" / "down")], check=False)
    return 0


BUILDER = "---\nname: Builder\nextends: builder   # the kit's member-bot builder, on for the demo\n---\n"


def with_members(config: Config) -> Config:
    """The demo's member bots (docs/member-bots.md), unless the config has them: a fresh key, a one-minute
    floor, and the kit's builder turned on — content/ as it is, seen through links in the run dir, plus
    ``bots/builder.md`` (content/ itself is left alone; edits to its files still go live)."""
    if config.members is not None:
        return config
    members = Members(keys=[f"dev:{new_key()}"], min_every_seconds=60, tick_seconds=5)
    content = Path(config.content.dir).resolve()
    if not (content / "bots" / "builder.md").exists():
        overlay = run_dir() / "content"
        shutil.rmtree(overlay, ignore_errors=True)
        (overlay / "bots").mkdir(parents=True)
        for entry in content.iterdir():
            if entry.name != "bots":
                (overlay / entry.name).symlink_to(entry)
        for bot in (content / "bots").iterdir():
            (overlay / "bots" / bot.name).symlink_to(bot)
        (overlay / "bots" / "builder.md").write_text(BUILDER, encoding="utf-8")
        config = config.model_copy(update={"content": config.content.model_copy(update={"dir": str(overlay)})})
    return config.model_copy(update={"members": members})


def with_door(config: Config) -> Config:
    """The demo's door (docs/door.md): on ``SUMMON_DOOR_PORT`` (default 29339) with a key of its own, unless the
    config names one."""
    if config.door is not None:
        return config
    port = int(os.environ.get("SUMMON_DOOR_PORT", "29339"))
    return config.model_copy(update={"door": Door(keys={"dev": secrets.token_urlsafe(32)}, signing_key="dev",
                                                  listen=Listen(host="127.0.0.1", port=port))})


def door_url(config: Config) -> str | None:
    listen = config.door.listen if config.door is not None else None
    return f"http://{listen.host}:{listen.port}/v1" if listen is not None else None


def remember_desk(path: Path, config: Config) -> None:
    """The demo's desk, written into the stack's config file, so the commands that read it after ``make dev``
    (``summon desk report``) find the desk the demo runs."""
    if config.desk is None:
        return
    written = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if "desk" not in written:
        written["desk"] = config.desk.model_dump(mode="json")
        path.write_text(yaml.safe_dump(written, sort_keys=False), encoding="utf-8")


async def with_desk(config: Config, client: ClientAPI) -> Config:
    """The demo's desk, unless the config has one: an inbox with the content's desk bots, served on
    ``SUMMON_DESK_PORT`` (default 29380), mirrored into a "desk staff" room the demo user owns."""
    if config.desk is not None:
        return config
    service_user = f"@{config.appservice.sender_localpart}:{config.homeserver.server_name}"
    staff_room = await client.create_room(name="desk staff", topic="The desk's conversations, one thread each",
                                          invitees=[UserID(service_user)])
    desk = Desk.model_validate({
        "listen": {"host": "127.0.0.1", "port": int(os.environ.get("SUMMON_DESK_PORT", "29380"))},
        "secret": secrets.token_hex(32), "staff_room": str(staff_room),
        "inboxes": {"web": {"title": "summon demo desk", "staff_key": secrets.token_hex(16), "daily_spend": 5.0}},
    })
    return config.model_copy(update={"desk": desk})


async def with_social(config: Config, client: ClientAPI) -> Config:
    """The demo's social rules (docs/social.md), unless the config has them: a "social review" room the demo user
    owns, and the fake bridge's puppets as guests."""
    if config.social is not None:
        return config
    service_user = f"@{config.appservice.sender_localpart}:{config.homeserver.server_name}"
    review = await client.create_room(name="social review", topic="Drafts of social replies: ✅ send · 🗑 discard",
                                      invitees=[UserID(service_user)])
    bridge = SocialBridge(users=demo_bridge.namespace(config.homeserver.server_name), network="Fakebook")
    return config.model_copy(update={"social": Social(staff_room=str(review), bridges=(bridge,))})


async def social_demo(env: dict[str, str], bridge_env: dict[str, str], client: ClientAPI,
                      service_user: str) -> dict[str, str]:
    """A DM bridged by the fake bridge, with Alex (its puppet) in it and the demo user a moderator there."""
    bridge = demo_bridge.DemoBridge(env["SUMMON_HS_URL"], bridge_env["SUMMON_FAKEBRIDGE_AS_TOKEN"],
                                    env.get("SUMMON_SERVER_NAME", "localhost"))
    try:
        alex = await bridge.puppet("alex", "Alex (Fakebook)")
        room = await bridge.bridged_room(kind="dm", channel="Fakebook DM with Alex", guests=[alex],
                                         invite=[str(client.mxid), service_user], staff={str(client.mxid): 50})
    finally:
        await bridge.close()
    await client.join_room(RoomID(room))
    return {"room_id": room, "guest": alex, "token": bridge_env["SUMMON_FAKEBRIDGE_AS_TOKEN"],
            "server_name": env.get("SUMMON_SERVER_NAME", "localhost")}


async def guest_says(text: str) -> int:
    """``summon say --guest``: the demo's Fakebook guest says ``text`` in the bridged DM, as the bridge relays it."""
    demo_file = run_dir() / "demo.json"
    social = json.loads(demo_file.read_text(encoding="utf-8")).get("social") if demo_file.exists() else None
    if not social:
        print("summon say --guest: no demo with a bridged room is running; start one with 'make dev'", file=sys.stderr)
        return 1
    demo = json.loads(demo_file.read_text(encoding="utf-8"))
    bridge = demo_bridge.DemoBridge(demo["hs_url"], social["token"], social["server_name"])
    try:
        await bridge.say(social["room_id"], social["guest"], text)
    finally:
        await bridge.close()
    print("said in the bridged DM; a rule it matches drafts a reply into \"social review\"")
    return 0


async def say(text: str, *, timeout: float = 30.0) -> int:
    demo_file = run_dir() / "demo.json"
    if not demo_file.exists():
        print("summon say: no demo is running; start one with 'make dev'", file=sys.stderr)
        return 1
    demo = json.loads(demo_file.read_text(encoding="utf-8"))
    client = ClientAPI(UserID(demo["user_id"]), base_url=demo["hs_url"], token=demo["token"])
    room = RoomID(demo["room_id"])
    try:
        # Sent like an older client would (no m.mentions): the bot is found by its name in the text.
        content = TextMessageEventContent(msgtype=MessageType.TEXT, body=text)
        sent = await client.send_message_event(room, EventType.ROOM_MESSAGE, content)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = await _answer_to(client, room, sent)
            if answer is not None:
                print(answer)
                return 0
            await SystemClock().sleep(0.25)
        print(f"summon say: no answer within {timeout:.0f}s (did the text name a bot?)", file=sys.stderr)
        return 1
    finally:
        await client.api.session.close()


async def _answer_to(client: ClientAPI, room: RoomID, event_id: str) -> str | None:
    page = await client.get_messages(room, PaginationDirection.BACKWARD, limit=50)
    for ev in page.events:  # type: ignore[attr-defined]  # a functional NamedTuple mypy cannot see into
        raw: dict[str, Any] = ev.serialize()
        content = raw.get("content") or {}
        rel = content.get("m.relates_to") or {}
        replied = (rel.get("m.in_reply_to") or {}).get("event_id")
        progress = str(content.get(TXN_MARKER, "")).endswith(".progress")
        if (raw.get("type") == "m.room.message" and content.get("msgtype") == "m.notice" and replied == event_id
                and not progress and content.get("body")):
            return str(content.get("body", ""))
    return None
