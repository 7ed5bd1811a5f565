"""`make client-check`: summon as a person sees it, in a real Matrix client (Hydrogen, bundled from the pinned
hydrogen-view-sdk by `npm run build`) in Debian's Chromium driven by Playwright, against a running `make dev`.

It logs in as the demo user, opens the demo room and walks: a mention (the answer is a reply under the bot's
display name, with its avatar drawn); `!help` (answered by the service user: a nested list with bold command
names); a typo (pointed at the command); a choices answer (its keycap reactions); a thread mention (the answer
carries the thread relation — Hydrogen has no thread view, so that is read from the event, and the timeline is
photographed). Every step asserts on the rendered page and saves a screenshot under client-check/shots/.

Lines a person types go through Hydrogen's composer. The thread line carries what no composer can write (a
thread relation), so it and the choices line (in words the demo's shipped script answers with choices) are sent
through the client-server API as the same person, and what the page shows of their answers is what is checked."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from playwright.async_api import expect

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tests.browser import chromium  # noqa: E402  (the desk's browser test's Chromium, installed when missing)

DIST = HERE / "dist"
SHOTS = HERE / "shots"
WAIT_MS = 30_000
OFFER = "How a mention becomes a run"  # the first choice the demo's shipped choices script offers
KEYCAPS = ("1\N{VARIATION SELECTOR-16}\N{COMBINING ENCLOSING KEYCAP}",
           "2\N{VARIATION SELECTOR-16}\N{COMBINING ENCLOSING KEYCAP}")


def demo() -> dict[str, Any]:
    run_dir = Path(os.environ.get("SUMMON_RUN_DIR") or REPO / ".dev" / "run")
    found = run_dir / "demo.json"
    if not found.is_file():
        sys.exit(f"client-check: no demo is running ({found} is missing): start one with `make dev` first")
    data: dict[str, Any] = json.loads(found.read_text(encoding="utf-8"))
    return data


async def serve() -> tuple[web.AppRunner, int]:
    """The bundled page and the SDK's assets, on a free port of 127.0.0.1."""
    if not (DIST / "app.js").is_file():
        sys.exit("client-check: the page is not built: run `make client-check` (it runs `npm run build`)")
    root = DIST.resolve()

    async def asset(request: web.Request) -> web.StreamResponse:
        file = (root / (request.match_info["name"] or "index.html")).resolve()
        if not file.is_relative_to(root) or not file.is_file():
            raise web.HTTPNotFound()
        return web.FileResponse(file)

    app = web.Application()
    app.router.add_get("/{name:.*}", asset)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]


class Person:
    """The demo user through the client-server API, for what no composer writes and for reading events."""

    def __init__(self, session: aiohttp.ClientSession, data: dict[str, Any]) -> None:
        self.session, self.hs, self.room = session, data["hs_url"], data["room_id"]
        self.headers = {"Authorization": f"Bearer {data['token']}"}

    async def send(self, content: dict[str, Any]) -> str:
        url = f"{self.hs}/_matrix/client/v3/rooms/{self.room}/send/m.room.message/{uuid.uuid4().hex}"
        async with self.session.put(url, json=content, headers=self.headers) as response:
            body = await response.json()
            assert response.status == 200, body
            return str(body["event_id"])

    async def answer_to(self, event_id: str) -> dict[str, Any]:
        """The notice that replies to ``event_id`` (waited for)."""
        url = f"{self.hs}/_matrix/client/v3/rooms/{self.room}/messages"
        deadline = time.monotonic() + WAIT_MS / 1000
        while time.monotonic() < deadline:
            async with self.session.get(url, params={"dir": "b", "limit": "50"}, headers=self.headers) as response:
                for event in (await response.json()).get("chunk", []):
                    rel = event.get("content", {}).get("m.relates_to") or {}
                    if (rel.get("m.in_reply_to") or {}).get("event_id") == event_id \
                            and event["content"].get("msgtype") == "m.notice":
                        return dict(event)
            await asyncio.sleep(0.2)
        raise AssertionError(f"no answer to {event_id} within {WAIT_MS / 1000:g} s")


def tile(page: Any, sender: str, quoting: str) -> Any:
    """The timeline tile of ``sender``'s reply to the line that says ``quoting``."""
    return (page.locator("li.Timeline_message")
            .filter(has=page.locator(".Timeline_messageSender", has_text=sender))
            .filter(has=page.locator(".ReplyPreviewView", has_text=quoting)).last)


async def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"))
    print(f"  screenshot: {(SHOTS / f'{name}.png').relative_to(REPO)}")


async def step(name: str, started: float) -> None:
    print(f"ok  {name} ({time.monotonic() - started:.1f} s)")


async def check() -> None:
    data = demo()
    runner, port = await serve()
    nonce = uuid.uuid4().hex[:6]  # tells this run's lines from an earlier run's in the same room
    try:
        async with aiohttp.ClientSession() as session, chromium() as browser:
            person = Person(session, data)
            page = await browser.new_page(viewport={"width": 1000, "height": 760})
            page.set_default_timeout(WAIT_MS)
            t = time.monotonic()
            await page.goto(f"http://127.0.0.1:{port}/")
            await page.fill("#homeserver", data["hs_url"])
            await page.press("#homeserver", "Tab")
            await page.fill("#username", data["user_id"].split(":")[0].lstrip("@"))
            await page.fill("#password", "demo")
            await page.click("button[type=submit]")
            await page.click("text=summon demo")
            composer = page.locator(".MessageComposer textarea, .MessageComposer input").first
            await composer.wait_for()
            await step("logged in as the demo user and opened the demo room", t)

            t = time.monotonic()
            asked = f"@Helper hello ({nonce})"
            await composer.fill(asked)
            await composer.press("Enter")
            answer = tile(page, "Helper", asked)
            await answer.wait_for()
            avatar = answer.locator(".Timeline_messageAvatar img")
            await avatar.wait_for()
            await page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=await avatar.element_handle())
            await step("a mention is answered as a reply, under the bot's display name, with its avatar", t)
            await shot(page, "mention")

            t = time.monotonic()
            helps = page.locator("li.Timeline_message").filter(
                has=page.locator(".Timeline_messageSender", has_text="summon")).filter(has_text="Commands you can run")
            before = await helps.count()  # an earlier run's answers are in the room too
            await composer.fill("!help")
            await composer.press("Enter")
            await expect(helps).to_have_count(before + 1, timeout=WAIT_MS)
            helped = helps.last
            assert await helped.locator(".Timeline_messageBody ul > li > ul > li").count() >= 1, "no nested list"
            assert "!summarise" in await helped.locator(".Timeline_messageBody strong").all_inner_texts()
            await helped.locator(".Timeline_messageAvatar img").wait_for()
            await step("!help is answered by the service user: a nested list, bold command names", t)
            await helped.scroll_into_view_if_needed()
            await shot(page, "help")

            t = time.monotonic()
            typo = f"!sumarise since=2d {nonce}"
            await composer.fill(typo)
            await composer.press("Enter")
            pointed = tile(page, "summon", typo)
            await pointed.wait_for()
            assert "did you mean" in await pointed.inner_text()
            assert await pointed.locator("code", has_text="!summarise").count() == 1
            await step("a typo is pointed at the command it was close to", t)

            t = time.monotonic()
            question = f"Helper, which copy do I have? ({nonce})"
            # "which" is a word of the demo's shipped choices script (appservice/demo.yaml): the stand-in offers them.
            await person.send({"msgtype": "m.text", "body": question})
            offered = tile(page, "Helper", question)
            await offered.wait_for()
            reactions = offered.locator(".Timeline_messageReactions")
            for keycap in KEYCAPS:
                await reactions.locator("button", has_text=keycap).wait_for()
            assert OFFER in await offered.inner_text()
            await step("a choices answer shows its keycap reactions", t)
            await offered.scroll_into_view_if_needed()
            await shot(page, "choices")

            t = time.monotonic()
            root = await person.send({"msgtype": "m.text", "body": f"A thread about books ({nonce})"})
            threaded = await person.send({
                "msgtype": "m.text", "body": f"Helper, in this thread? ({nonce})",
                "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": True,
                                 "m.in_reply_to": {"event_id": root}}})
            event = await person.answer_to(threaded)
            rel = event["content"]["m.relates_to"]
            assert rel["rel_type"] == "m.thread" and rel["event_id"] == root, rel
            assert rel["m.in_reply_to"]["event_id"] == threaded and rel.get("is_falling_back") is False, rel
            shown = page.locator(f'li[data-event-id="{event["event_id"]}"]')
            await shown.wait_for()
            await step("a thread mention's answer carries the thread relation (read from the event; "
                       "Hydrogen shows it in the main timeline)", t)
            await shown.scroll_into_view_if_needed()
            await shot(page, "thread")
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(check())
    print("client-check: passed")
