"""Commands on the desk (issue 25 item 5): the commands a contact may run in an inbox (``surfaces: [desk]``, its
bot works the inbox, ``for:`` admits the contact), with their fields' kinds; one run over the public API with
typed fields, read by the engine's own argument typing; its line in the contact's name for the staff, and its
bot's answer arriving as any bot answer; a tool command runs its tool directly. Real PostgreSQL, the desk's real
HTTP listener, the real worker on the scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from appservice.kinds import KINDS
from engine.content import Registry, compile_sources
from engine.content.commands import command_prompt
from engine.content.files import read_kit
from tests.book import BOOK
from tests.desk.conftest import BOTS, STAFF_KEY, Contact, DeskRig

pytestmark = pytest.mark.db

COMMANDS = {
    "commands/recap.md": (
        "---\nhint: A recap of your conversation\nbot: clerk\nsurfaces: [desk]\nargs:\n"
        "  - {name: since, kind: span, label: How far back, default: 1d}\n"
        "  - {name: length, kind: choice, label: How long, choices: [short, detailed], default: short}\n"
        "  - {name: urgent, kind: boolean, label: Urgent, default: false}\n"
        "---\nRecap the last {since}, {length}. Urgent: {urgent}.\n"),
    "commands/account.md": "---\nhint: Your account\nbot: clerk\nsurfaces: [desk]\nfor: authenticated\n---\nLook it up.\n",
    "commands/guided.md": "---\nhint: A tour\nbot: guide\nsurfaces: [desk]\n---\nGive a tour.\n",
    "commands/whoami.md": "---\nhint: What we know of you\ntool: about_me\nsurfaces: [desk]\n---\n",
}


@pytest.fixture
def desk_registry() -> Registry:
    registry = compile_sources({**BOTS, **COMMANDS}, kinds=KINDS, server_name="localhost", kit=read_kit())
    assert isinstance(registry, Registry), registry
    return registry


async def listed(desk: DeskRig, who: Contact) -> list[dict[str, Any]]:
    result = await desk.call("GET", desk.base(who) + "/commands", token=who.token)
    return list(result["payload"])


async def run(desk: DeskRig, who: Contact, conversation: int, name: str, args: dict[str, Any], *,
              script: list[dict[str, Any]] | None = None, expect: int = 200) -> Any:
    body: dict[str, Any] = {"args": args}
    # The run ends with the command's own words; the contact's line (``/name …``) is in it before them.
    BOOK.say(f"/{name}", script, anywhere=True)
    return await desk.call("POST", f"{desk.base(who)}/conversations/{conversation}/commands/{name}", token=who.token,
                           body=body, expect=expect)


async def test_the_commands_a_contact_may_run_here_with_their_fields(desk: DeskRig) -> None:
    guest = await desk.contact("always")
    [recap] = await listed(desk, guest)  # not another inbox's bot's, nor one for signed-in contacts
    assert (recap["name"], recap["hint"]) == ("recap", "A recap of your conversation")
    assert [(f["name"], f["kind"], f["label"], f["default"], f["choices"]) for f in recap["args"]] == [
        ("since", "span", "How far back", "1d", []), ("length", "choice", "How long", "short", ["short", "detailed"]),
        ("urgent", "boolean", "Urgent", False, [])]
    assert all(f["accepts"] for f in recap["args"])  # what each takes, in the site's words
    assert "prompt" not in recap
    member = await desk.signed_in("always", "@ann:localhost")
    assert [c["name"] for c in await listed(desk, member)] == ["account", "recap"]
    assert [c["name"] for c in await listed(desk, await desk.contact("ask"))] == ["guided"]
    assert [c["name"] for c in await listed(desk, await desk.contact("personal"))] == ["whoami"]
    await desk.db.workers.beat("desk-test", usable=False, mode="none: no_key", providers=[])
    assert await listed(desk, guest) == []  # no provider, no bots: nothing to run


async def test_a_command_runs_with_typed_fields_and_its_bot_answers(desk: DeskRig, desk_registry: Registry) -> None:
    ann = await desk.contact("always", name="Ann")
    conversation = await desk.conversation(ann)
    line = await run(desk, ann, conversation, "recap", {"since": "2d", "length": "detailed", "urgent": True},
                     script=[{"text": "You asked about your order."}])
    assert (line["message_type"], line["content"]) == ("incoming", "/recap since=2d length=detailed urgent=true")
    context = await desk.db.pool.fetchval("SELECT context FROM agent_runs WHERE place = $1", f"desk:{conversation}")
    assert context["command"] == {"name": "recap", "args": {"since": "2d", "length": "detailed", "urgent": True}}
    # What the worker asks the bot, resolved from the command as published and the arguments the run keeps.
    assert command_prompt(desk_registry.commands, desk_registry.strings, context) == (
        "Recap the last 2 days, detailed. Urgent: yes.")
    assert await desk.work() == 1
    answer = (await desk.messages(ann, conversation))[-1]
    assert (answer["message_type"], answer["content"], answer["bot"], answer["private"]) == (
        "outgoing", "You asked about your order.", "clerk", False)
    # The staff see the command in the conversation, as the contact's line.
    staff = [m for m in await desk.staff_messages(conversation) if m["message_type"] == "incoming"]
    assert [(m["content"], m["content_attributes"]["command"]["name"]) for m in staff] == [
        ("/recap since=2d length=detailed urgent=true", "recap")]


async def test_defaults_fill_the_fields_not_given(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    line = await run(desk, ann, conversation, "recap", {}, script=[{"text": "ok"}])
    assert line["content"] == "/recap since=1d length=short urgent=false"


async def test_a_field_that_does_not_fit_is_refused_in_words_and_nothing_starts(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    refused = await run(desk, ann, conversation, "recap", {"since": "soon"}, expect=422)
    assert "since" in refused["error"] and "soon" in refused["error"]
    refused = await run(desk, ann, conversation, "recap", {"length": "medium"}, expect=422)
    assert "short, detailed" in refused["error"]
    refused = await run(desk, ann, conversation, "recap", {"colour": "red"}, expect=422)
    assert "colour" in refused["error"]
    await run(desk, ann, conversation, "recap", {"since": ["2d"]}, expect=422)
    assert await desk.messages(ann, conversation) == []
    assert await desk.db.pool.fetchval("SELECT count(*) FROM agent_runs") == 0


async def test_a_command_not_theirs_to_run_is_withheld(desk: DeskRig) -> None:
    guest = await desk.contact("always")
    conversation = await desk.conversation(guest)
    await run(desk, guest, conversation, "account", {}, expect=404)  # for signed-in contacts only
    await run(desk, guest, conversation, "guided", {}, expect=404)  # another inbox's bot
    await run(desk, guest, conversation, "nonesuch", {}, expect=404)
    assert await desk.messages(guest, conversation) == []


async def test_a_tool_command_runs_its_tool_directly(desk: DeskRig) -> None:
    ann = await desk.signed_in("personal", "@ann:localhost")
    conversation = await desk.conversation(ann)
    await run(desk, ann, conversation, "whoami", {})
    context = await desk.db.pool.fetchval("SELECT context FROM agent_runs WHERE place = $1", f"desk:{conversation}")
    assert context["command"] == {"name": "whoami", "args": {}, "tool": "about_me"}
    assert await desk.work() == 1  # no model is asked: no script was given
    answer = (await desk.messages(ann, conversation))[-1]
    assert (answer["message_type"], answer["bot"]) == ("outgoing", "keeper")


async def test_commands_are_off_once_a_person_has_the_conversation(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.call("POST", f"{desk.base(ann)}/conversations/{conversation}/toggle_status", token=ann.token,
                    body={"status": "open"})
    refused = await run(desk, ann, conversation, "recap", {}, expect=409)
    assert refused == {"error": "A person has this conversation now, so commands are off here."}
    await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY, body={"content": "Hi"})
    await run(desk, ann, conversation, "recap", {}, expect=409)
