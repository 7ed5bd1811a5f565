"""The demo's scripts (``summon dev``) make the stand-in call tools: only the demo user's lines are scripted —
anybody else who can reach the dev homeserver gets the stand-in's own answer, whatever their line carries."""

from __future__ import annotations

from appservice.dev import SCRIPT_KEY, demo_scripts, demo_turns

DEMO = "@demo:localhost"
TOOL_CALL = [{"tool_calls": [{"id": "c1", "name": "raise_ticket", "arguments": {"subject": "x", "body": "y"}}]}]


def line(sender: str, body: str, script: list[dict[str, object]] | None = None) -> dict[str, object]:
    content: dict[str, object] = {"msgtype": "m.text", "body": body}
    if script is not None:
        content[SCRIPT_KEY] = script
    return {"type": "m.room.message", "sender": sender, "content": content}


def test_only_the_demo_users_lines_are_scripted() -> None:
    turns = demo_turns(demo_scripts(), demo_user=DEMO, commands=lambda: {"summarise"})
    assert turns(line(DEMO, "hello", TOOL_CALL)) == TOOL_CALL
    shipped = turns(line(DEMO, "@Helper search the docs"))
    assert shipped is not None and "tool_calls" in shipped[0]
    assert turns(line("@mallory:localhost", "hello", TOOL_CALL)) is None
    assert turns(line("@mallory:localhost", "@Helper search the docs")) is None


def test_a_script_never_answers_for_a_command_that_was_not_published() -> None:
    published: set[str] = {"summarise"}
    turns = demo_turns(demo_scripts(), demo_user=DEMO, commands=lambda: published)
    assert turns(line(DEMO, "!summarise since=2h")) is not None
    published.clear()  # content/commands/ did not publish: the command is not there, and no script says it is
    assert turns(line(DEMO, "!summarise since=2h")) is None
