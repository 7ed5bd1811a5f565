"""The ``summon`` command: dev, serve, worker, check, publish, registration, migrate, runs, status, say, grant,
desk, keys."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from appservice.config import Config, load_config, provider_settings, registration
from appservice.kinds import KINDS
from appservice.logs import configure, secrets_of
from appservice.matrix.tables.rooms import RoomTables
from engine.errors import ConfigError, ContentError, StoreError, SummonError

if TYPE_CHECKING:
    from engine.providers.mock import StandInBook

log = logging.getLogger("summon")


def config_path(given: str | None, env: Mapping[str, str]) -> Path:
    """The config file: ``-c``, else $SUMMON_CONFIG, else ./summon.yaml — and when there is none here, the one
    a running ``summon dev`` wrote (so ``summon runs`` and ``summon status`` work after ``make dev``)."""
    if given or env.get("SUMMON_CONFIG"):
        return Path(given or env["SUMMON_CONFIG"])
    here = Path("summon.yaml")
    if here.exists():
        return here
    from appservice.dev import run_dir

    demo = run_dir() / "summon.yaml"
    return demo if demo.exists() else here


def _config(args: argparse.Namespace) -> Config:
    config = load_config(config_path(args.config, os.environ), os.environ)
    # From here on the process logs as the config says, with its secrets known to the one handler.
    configure(config.logging.format, verbose=args.verbose, secrets=secrets_of(config, os.environ))
    return config


async def _serve(config: Config, *, http: bool, stand_in: StandInBook | None = None) -> None:
    """``stand_in``: the stand-in model's book, handed in only by the tests' own process (never from the command
    line)."""
    from appservice.app import Service

    service = Service(config, http=http, stand_in=stand_in)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, service.stop_event.set)
    await service.serve_forever()


def cmd_serve(args: argparse.Namespace) -> int:
    asyncio.run(_serve(_config(args), http=True))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    asyncio.run(_serve(_config(args), http=False))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from engine.content.files import check

    root = Path(args.content) if args.content else Path(_config(args).content.dir)
    server = args.server_name or (None if args.content else _config(args).homeserver.server_name) or "localhost"
    errors = check(root, server, kinds=KINDS)
    if not errors:
        errors = _unpriced(root, server)
    for line in errors:
        print(line)
    if errors:
        return 1
    print(f"{root}: ok")
    return 0


def _unpriced(root: Path, server: str) -> list[str]:
    """With buying on (the providers in this environment), a line per bot whose model has no price: such a bot is
    refused when it is published (every other bot runs), so ``check`` says so first."""
    from engine.clock import SystemClock
    from engine.content import Registry
    from engine.content.files import compile_content
    from engine.providers.config import choose_answerer

    registry = compile_content(root, kinds=KINDS, server_name=server, fetch_spec=None)
    if not isinstance(registry, Registry):
        return []
    answering = choose_answerer(provider_settings(os.environ), SystemClock())
    try:
        return [f"{line}; it is refused when published, every other bot runs"
                for line in answering.unpriced(registry.bots.values())]
    finally:
        asyncio.run(answering.aclose())


def cmd_publish(args: argparse.Namespace) -> int:
    from appservice.app import compile_content, keep_puppet_prefix
    from appservice.database import migrate_database, open_store
    from engine.clock import SystemClock
    from engine.memory.ready import recallable
    from engine.providers.config import choose_answerer
    from engine.run.publish import buyable, publish

    config = _config(args)

    async def go() -> None:
        await migrate_database(config.database)
        store = await open_store(config.database, min_size=1, max_size=2)
        answering = choose_answerer(provider_settings(os.environ), SystemClock())
        try:
            await keep_puppet_prefix(store, config)
            registry, refused = await recallable(store, compile_content(config, await store.of(RoomTables).encrypted()))
            for line in refused:
                print(line, file=sys.stderr)
            # With buying on, a bot whose model has no price is refused (no spend limit could hold against it):
            # that bot alone; every other bot is published.
            registry, _, unpriced = buyable(registry, answering.unpriced)
            for line in unpriced:
                print(line, file=sys.stderr)
            slugs = await publish(store, registry)
        finally:
            await answering.aclose()
            await store.close()
        print(f"published {len(slugs)} bot(s): {', '.join(slugs)}")

    asyncio.run(go())
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from appservice.database import open_store
    from appservice.inspect import runs_report

    config = _config(args)

    async def go() -> list[str]:
        store = await open_store(config.database, min_size=1, max_size=2)
        try:
            return await runs_report(store, run_id=args.id, room=args.room, bot=args.bot, limit=args.limit)
        finally:
            await store.close()

    lines = asyncio.run(go())
    print("\n".join(lines) if lines else "no runs")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from appservice.status import healthy, render, status

    config = _config(args)
    lines = asyncio.run(status(config))
    print(render(lines))
    return 0 if healthy(lines) else 1


def cmd_migrate(args: argparse.Namespace) -> int:
    from appservice.database import migrate_database

    applied = asyncio.run(migrate_database(_config(args).database))
    print(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else ""))
    return 0


def cmd_registration(args: argparse.Namespace) -> int:
    text = yaml.safe_dump(registration(_config(args)), sort_keys=False)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        write_private(Path(args.output), text)
        print(f"wrote {args.output} (mode 0600: it holds both tokens; the homeserver's user must be able to read it)")
    return 0


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable and writable by its owner only — a file that was already there
    is made so before a byte of the new text is written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text)


def cmd_dev(args: argparse.Namespace) -> int:
    from appservice.dev import dev

    return asyncio.run(dev(verbose=args.verbose))


def cmd_say(args: argparse.Namespace) -> int:
    from appservice.dev import guest_says, say

    if args.guest:
        return asyncio.run(guest_says(" ".join(args.text)))

    return asyncio.run(say(" ".join(args.text), timeout=args.timeout))


def cmd_grant(args: argparse.Namespace) -> int:
    """A door grant for an operator (docs/door.md): printed on stdout, recorded, never stored itself."""
    from datetime import UTC, datetime

    from appservice.app import compile_content
    from appservice.door.issue import issue
    from engine.store import Store, migrate

    config = _config(args)
    door = config.door
    if door is None:
        raise ConfigError("config: door: is not configured, so there is no door to grant")
    registry = compile_content(config)
    bot = registry.get(args.bot)
    if bot is None or "voice" not in bot.surfaces:
        voiced = sorted(slug for slug, b in registry.bots.items() if "voice" in b.surfaces)
        raise ConfigError(f"grant: {args.bot!r} is no bot on the voice surface (those that are: "
                          f"{', '.join(voiced) or 'none'})")
    minutes = args.minutes if args.minutes is not None else door.minutes

    async def go() -> tuple[str, datetime]:
        await migrate(config.database.dsn)
        store = await Store.connect(config.database.dsn, min_size=1, max_size=2)
        try:
            async with store.transaction("grant") as tx:
                token, grant = await issue(tx, door, server_name=config.homeserver.server_name, bot=bot,
                                           person=args.person, room=args.room, now=datetime.now(UTC),
                                           minutes=minutes, minted_by="operator", one_to_one=args.one_to_one)
        finally:
            await store.close()
        return token, grant.expires_at

    try:
        token, expires = asyncio.run(go())
    except ValueError as exc:
        raise ConfigError(f"grant: {exc}") from None
    print(token)
    print(f"grant for {args.person} to talk to {bot.slug} until {expires.isoformat()}", file=sys.stderr)
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """``summon keys new`` prints a fresh member-bot key; ``summon keys rotate`` re-seals every charter under
    the first key of ``members.keys`` (put the new key first, rotate, then drop the old one)."""
    from appservice.members.seal import new_key

    if args.action == "new":
        print(f"{args.id}:{new_key()}")
        return 0
    from appservice.database import migrate_database, open_store
    from appservice.members.book import Book
    from appservice.members.seal import Keyring

    config = _config(args)
    if config.members is None:
        raise ConfigError("config: members: member bots are not configured (no keys to rotate to)")
    keyring = Keyring.parse(config.members.keys)

    async def go() -> tuple[int, list[str]]:
        await migrate_database(config.database)
        store = await open_store(config.database, min_size=1, max_size=2)
        try:
            return await Book(keyring).rotate(store)
        finally:
            await store.close()

    done, stuck = asyncio.run(go())
    print(f"re-sealed {done} charter(s) under key {keyring.current}")
    for charter_id in stuck:
        print(f"could not open charter {charter_id}: left as it is (its key is not configured, or it is corrupt)")
    return 1 if stuck else 0


def cmd_desk(args: argparse.Namespace) -> int:
    """``summon desk report``: the desk's outcome figures (docs/desk.md), for the inboxes the staff key reaches."""
    import json
    from datetime import timedelta

    from appservice.database import open_store
    from appservice.desk.report import (
        DEFAULT_DAYS,
        BadWindow,
        moment,
        outcome_report,
        reached,
        report_json,
        report_table,
    )
    from appservice.desk.tables import DeskTables
    from engine.clock import SystemClock

    config = _config(args)
    if config.desk is None:
        raise ConfigError("config: desk: the desk is not configured")
    key = args.key or os.environ.get("SUMMON_DESK_STAFF_KEY", "")
    inboxes = config.desk.inboxes
    by_name = {name: inbox.staff_key for name, inbox in inboxes.items()}
    names = [name for name, staff_key in by_name.items() if key and reached(key, {0: staff_key})]
    if args.inbox is not None:
        names = [name for name in names if name == args.inbox]
    if not names:
        print("summon desk report: a staff key of the inbox is needed (--key, or SUMMON_DESK_STAFF_KEY)"
              + (f" — and inbox {args.inbox!r} must be one it reaches" if args.inbox else ""), file=sys.stderr)
        return 2
    now = SystemClock().now()
    try:
        since = moment(args.since, now=now, default=now - timedelta(days=DEFAULT_DAYS))
        until = moment(args.until, now=now, default=now)
    except BadWindow as exc:
        print(f"summon desk report: {exc}", file=sys.stderr)
        return 2

    async def go() -> tuple[str, dict[int, str]]:
        store = await open_store(config.database, min_size=1, max_size=2)
        try:
            rows = {name: await store.of(DeskTables).inbox_by_identifier(inboxes[name].identifier or name)
                    for name in names}
            ids = {row.id: name for name, row in rows.items() if row is not None}
            made = await outcome_report(store, sorted(ids), since=since, until=until, now=now,
                                        durable_days=args.durable_days)
            return (json.dumps(report_json(made, ids), indent=2) if args.json else report_table(made, ids)), ids
        finally:
            await store.close()

    try:
        text, _ = asyncio.run(go())
    except BadWindow as exc:
        print(f"summon desk report: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="summon", description="LLM bots for Matrix, defined in markdown.")
    parser.add_argument("-c", "--config", help="the config file (default: $SUMMON_CONFIG, ./summon.yaml, or the running "
                        "demo's)")
    parser.add_argument("-v", "--verbose", action="store_true")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-c", "--config", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    _add = sub.add_parser
    sub.add_parser = lambda name, **kw: _add(name, parents=[common], **kw)  # type: ignore[method-assign]
    sub.add_parser("serve", help="the appservice, the outbox and worker slots, in one process").set_defaults(
        fn=cmd_serve)
    sub.add_parser("worker", help="worker slots and ticks only; run as many as you like").set_defaults(fn=cmd_worker)
    p = sub.add_parser("check", help="compile content/ and print every error as path:line: message")
    p.add_argument("content", nargs="?", help="the content folder (default: the config's content.dir)")
    p.add_argument("--server-name", help="the homeserver's name (default: the config's)")
    p.set_defaults(fn=cmd_check)
    sub.add_parser("publish", help="compile content/ and project it into the database").set_defaults(fn=cmd_publish)
    sub.add_parser("migrate", help="apply the database migrations").set_defaults(fn=cmd_migrate)
    p = sub.add_parser("runs", help="recent runs with their endings and every step (kind, provider, tokens, cost, time)")
    p.add_argument("--id", type=int, help="one run")
    p.add_argument("--room", help="only runs in this room")
    p.add_argument("--bot", help="only this bot's runs")
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(fn=cmd_runs)
    sub.add_parser("status", help="one screen of health (database, homeserver, workers, providers, queue, "
                   "outbox); exits 1 when something is down").set_defaults(fn=cmd_status)
    p = sub.add_parser("registration", help="write the appservice registration.yaml for the homeserver")
    p.add_argument("-o", "--output", default="registration.yaml")
    p.set_defaults(fn=cmd_registration)
    sub.add_parser("dev", help="a local Postgres + Synapse + summon on the mock model").set_defaults(fn=cmd_dev)
    p = sub.add_parser("say", help="say something as the demo user (after `summon dev`) and print the answer")
    p.add_argument("text", nargs="+")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--guest", action="store_true",
                   help="say it as the demo's Fakebook guest in the bridged DM instead (docs/social.md)")
    p.set_defaults(fn=cmd_say)
    p = sub.add_parser("grant", help="mint a door grant for a person and a bot (printed; the door must be configured)")
    p.add_argument("--bot", required=True, help="the bot's slug (a bot on surfaces: [voice])")
    p.add_argument("--person", required=True, help="whom it talks for: @name:server")
    p.add_argument("--room", help="the one room the session may be bound to (default: any it is verified in)")
    p.add_argument("--minutes", type=float, help="how long it lives (at most 30; default: door.minutes)")
    p.add_argument("--one-to-one", action="store_true",
                   help="the session is heard by this person alone (a headset): with no room, personal tools may answer")
    p.set_defaults(fn=cmd_grant)
    p = sub.add_parser("desk", help="the desk: `report` prints its outcome figures (docs/desk.md)")
    p.add_argument("action", choices=["report"])
    p.add_argument("--key", help="an inbox's staff key (default: $SUMMON_DESK_STAFF_KEY): the report covers the "
                   "inboxes it reaches")
    p.add_argument("--inbox", help="one inbox (its name in the config)")
    p.add_argument("--since", help="conversations started since: 7d, 12h, 2w or a date (default: 30 days ago)")
    p.add_argument("--until", help="… and before (default: now)")
    p.add_argument("--durable-days", type=float, default=7.0, help="how long a resolution must hold to be durable")
    p.add_argument("--json", action="store_true", help="the figures as JSON")
    p.set_defaults(fn=cmd_desk)
    p = sub.add_parser("keys", help="member bots' keys: `new` prints one, `rotate` re-seals every charter")
    p.add_argument("action", choices=["new", "rotate"])
    p.add_argument("--id", default="k1", help="the id `new` prints the key under")
    p.set_defaults(fn=cmd_keys)
    args = parser.parse_args(argv)
    configure("text", verbose=args.verbose)
    try:
        return int(args.fn(args))
    except ConfigError as exc:
        print(f"summon: {exc}", file=sys.stderr)
        return 2
    except ContentError as exc:
        for line in exc.errors:
            print(line, file=sys.stderr)
        return 1
    except (StoreError, SummonError) as exc:
        print(f"summon: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
