"""The demo's scripts (``summon dev``) make the stand-in call tools: only the demo user's lines are scripted —
anybody else who can reach the dev homeserver gets the stand-in's own answer. The demo's book reads what the run
was asked (its opening), never anything a line carries."""

from __future__ import annotations

from appservice.stand_in import demo_book, demo_entries
from engine.core.messages import Message, ModelRequest

DEMO = "@demo:localhost"


def asked(*lines: str) -> ModelRequest:
    return ModelRequest(system="", messages=(Message(role="user", text="\n".join(lines)),))


def test_only_the_demo_users_lines_are_scripted() -> None:
    turns = demo_book(demo_entries(), demo_user=DEMO, commands=lambda: {"summarise"})
    for name in ("demo", DEMO):  # a line is named by its display name, else its sender
        shipped = turns(asked(f"{name}: @Helper search the docs"))
        assert shipped is not None and "tool_calls" in shipped[0]
    assert turns(asked("demo: hello")) is None
    assert turns(asked("@mallory:localhost: @Helper search the docs")) is None
    assert turns(asked("mallory: @Helper search the docs")) is None
    # The demo user's earlier words do not script a stranger's mention after them.
    assert turns(asked("demo: @Helper search the docs", "mallory: @Helper which one?")) is None


def test_a_script_never_answers_for_a_command_that_was_not_published() -> None:
    published: set[str] = {"summarise"}
    turns = demo_book(demo_entries(), demo_user=DEMO, commands=lambda: published)
    # A command's run ends with the command's own words, after the line that ran it.
    run = asked("demo: !summarise since=2h", "", "Summarise this room's last two hours.")
    assert turns(run) is not None
    published.clear()  # content/commands/ did not publish: the command is not there, and no script says it is
    assert turns(run) is None
