"""`make dev` end to end, as a newcomer meets it: on ports of its own, the demo comes up on the stand-in model;
`summon say` gets answers that show the machine (the stand-in saying what it is, a tool call, choices with
keycaps, a slow step with its progress line, a command, `!help` listing it); what was published is what
`summon check` compiles from content/; `summon runs` and `summon status` work without `-c`; `make client-check`
passes against it in a real Matrix client; and Ctrl-C (SIGINT) stops every process it started."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import aiohttp
import asyncpg
from mautrix.client import ClientAPI
from mautrix.types import PaginationDirection, RoomID, UserID

from appservice.kinds import KINDS
from engine.content import Registry
from engine.content.files import compile_content
from tests.e2e.support import REPO, RUNS, ports, read_env
from tests.faults.support import alive


def session_members(sid: int) -> list[int]:
    """Every live process in session ``sid`` (make and all it started: summon, Synapse, PostgreSQL)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


async def summon(*args: str, env: dict[str, str], cwd: Path, timeout: float = 60) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "appservice", *args, env=env, cwd=cwd,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


async def test_make_dev_shows_the_machine_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    run = RUNS / f"dev-{uuid.uuid4().hex[:6]}"
    # A newcomer's shell: no provider, no stand-in chosen, no config; the demo chooses the stand-in itself.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SUMMON_", "AGENTS_")) or k.startswith("SUMMON_TEST_")}
    env.update(ports(), SUMMON_RUN_DIR=str(run), PYTHONPATH=str(REPO))
    log = (tmp_path / "dev.log").open("w")
    make = subprocess.Popen(["make", "-s", "dev"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    here = tmp_path / "elsewhere"  # no summon.yaml here: the commands find the demo's
    here.mkdir()
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while "summon is running" not in (tmp_path / "dev.log").read_text():
            assert make.poll() is None, (tmp_path / "dev.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "dev.log").read_text()[-3000:]
            await asyncio.sleep(0.2)
        banner = (tmp_path / "dev.log").read_text()
        assert "stand-in model" in banner and "!summarise" in banner
        pids = [int(p.read_text()) for p in (run / "pids").glob("*.pid")]
        assert len(pids) >= 2  # PostgreSQL and Synapse

        code, hello = await summon("say", "@Helper hello", env=env, cwd=here)
        assert code == 0, hello
        assert "stand-in" in hello

        code, found = await summon("say", "@Helper search the docs for commands", env=env, cwd=here)
        assert code == 0 and "search_site" in found, found
        code, runs = await summon("runs", "--limit", "1", env=env, cwd=here)
        assert code == 0, runs
        assert "tool_call" in runs and "search_site" in runs and "tool_result" in runs, runs

        code, offered = await summon("say", "@Helper which should I pick?", env=env, cwd=here)
        assert code == 0 and "2. What commands can do" in offered, offered

        code, slow = await summon("say", "@Helper take it slow", env=env, cwd=here)
        assert code == 0 and "seven seconds" in slow, slow

        code, catch_up = await summon("say", "!summarise", env=env, cwd=here)
        assert code == 0 and "Catch-up" in catch_up, catch_up
        code, helped = await summon("say", "!help", env=env, cwd=here)
        assert code == 0 and "!summarise" in helped, helped

        code, status = await summon("status", env=env, cwd=here)
        assert code == 0, status
        assert "stand-in" in status

        # The desk's figures for the demo's conversations: one started from the widget's API shows in the report.
        desk_url = re.search(r"Desk widget: (http://\S+)/desk/widget", banner)
        staff_key = re.search(r"desk report --key (\S+)", banner)
        assert desk_url and staff_key, banner
        inbox = f"{desk_url.group(1)}/public/api/v1/inboxes/web"
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{inbox}/contacts", json={"name": "Dee"}) as resp:
                dee = await resp.json()
            async with http.post(f"{inbox}/contacts/{dee['source_id']}/conversations", json={},
                                 headers={"Authorization": f"Bearer {dee['pubsub_token']}"}) as resp:
                assert resp.status == 200, await resp.text()
        code, figures = await summon("desk", "report", "--key", staff_key.group(1), "--json", env=env, cwd=here)
        assert code == 0, figures
        report, _ = json.JSONDecoder().raw_decode(figures[figures.index("{"):])  # stdout first, then any log line
        assert [i["conversations"] for i in report["inboxes"] if i["inbox"] == "web"] == [1], figures

        # What a person in the room sees: keycaps on the answer with choices; a progress line for the slow run.
        demo = json.loads((run / "demo.json").read_text())
        client = ClientAPI(UserID(demo["user_id"]), base_url=demo["hs_url"], token=demo["token"])
        try:
            page = await client.get_messages(RoomID(demo["room_id"]), PaginationDirection.BACKWARD, limit=100)
            keys = {ev.serialize()["content"].get("m.relates_to", {}).get("key")  # type: ignore[attr-defined]
                    for ev in page.events if ev.serialize()["type"] == "m.reaction"}  # type: ignore[attr-defined]
        finally:
            await client.api.session.close()
        assert {"1️⃣", "2️⃣", "3️⃣"} <= keys
        dsn = read_env(run / "env")["SUMMON_DSN"]
        conn = await asyncpg.connect(dsn)
        try:
            progress = await conn.fetchval("SELECT count(*) FROM outbox WHERE txn_id LIKE 'summon.run%.progress' "
                                           "AND status = 'sent'")
            kinds = {r["kind"] for r in await conn.fetch("SELECT DISTINCT kind FROM agent_steps")}
            published = {table: {r["name"] for r in await conn.fetch(
                f"SELECT {key} AS name FROM {table} WHERE withdrawn_at IS NULL")}
                for table, key in (("skills", "name"), ("commands", "name"), ("tools", "name"))}
            searched = {(r["collection"], r["slug"]) for r in await conn.fetch("SELECT collection, slug FROM site_search")}
        finally:
            await conn.close()
        # What `make dev` published is what `summon check` compiles from content/ (with the demo's builder on).
        compiled = compile_content(REPO / "content", kinds=KINDS, server_name="localhost", fetch_spec=None)
        assert isinstance(compiled, Registry), compiled
        assert published["commands"] == set(compiled.commands) and "summarise" in published["commands"]
        assert set(compiled.skills) <= published["skills"] and "matrix-help" in published["skills"]
        assert published["tools"] == set(compiled.tools)
        assert {("docs", path) for path in compiled.docs} <= searched and compiled.docs
        assert progress == 1
        assert {"tool_call", "tool_result", "answer"} <= kinds

        # The same demo in a real Matrix client (Hydrogen in Chromium): `make client-check` against this stack.
        checked = subprocess.run(["make", "-s", "client-check"], cwd=REPO, env=env, capture_output=True, text=True,
                                 timeout=300)
        assert checked.returncode == 0 and "client-check: passed" in checked.stdout, checked.stdout + checked.stderr
    finally:
        # Ctrl-C in the terminal: SIGINT to the whole foreground group.
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGINT)
        try:
            make.wait(90)
        finally:
            left = session_members(make.pid)
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            log.close()
            subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, timeout=60, check=False)
    assert left == [], f"still running after Ctrl-C: {left}"
    assert not any(alive(pid) for pid in pids)
