"""The pure parts of what a bot is given: the token budget (newest kept, a thread's root kept) and how the
opening of a run reads the context, including lines that joined it later."""

from __future__ import annotations

from typing import Any

from appservice.matrix.asking.context import cost, within_budget
from engine.core.prompt import opening, said_since


def line(said: str, name: str = "Alice") -> dict[str, Any]:
    return {"event_id": f"${said}", "sender": "@a:x", "name": name, "said": said, "ts": 0}


def test_everything_fits_a_generous_budget() -> None:
    lines = [line(f"l{n}") for n in range(5)]
    assert within_budget(lines, 1000) == lines


def test_the_newest_lines_are_kept_within_the_budget() -> None:
    lines = [line(f"line {n:02d}" + "x" * 20) for n in range(30)]  # 40 characters each
    kept = within_budget(lines, 25)  # 100 characters: two lines
    assert kept == lines[-2:]
    assert sum(cost(x) for x in kept) <= 100


def test_the_newest_line_is_kept_even_alone_over_budget_and_shortened() -> None:
    kept = within_budget([line("old"), line("y" * 500)], 10)
    assert len(kept) == 1
    assert kept[0]["said"].endswith("…")
    assert cost(kept[0]) <= 40


def test_a_threads_root_is_kept() -> None:
    lines = [line("root")] + [line(f"reply {n}" + "z" * 30) for n in range(10)]
    kept = within_budget(lines, 30, keep_first=True)
    assert kept[0]["said"] == "root"
    assert kept[-1]["said"].startswith("reply 9")
    assert len(kept) < len(lines)


def test_no_lines_no_budget() -> None:
    assert within_budget([], 0) == []


def test_opening_reads_header_lines_and_members_and_leaves_later_to_the_steps() -> None:
    context = {
        "kind": "thread", "header": "The thread in Laptops, oldest first:",
        "lines": [line("which laptop?"), {**line("Bob joined.", "Bob"), "member": True}, line("for newbs?")],
        "later": [line("and under 1000?")], "later_header": "Said since:",
    }
    text = opening(context, "for newbs?")[0].text
    assert text == ("The thread in Laptops, oldest first:\n\n"
                    "Alice: which laptop?\nBob joined.\nAlice: for newbs?")
    assert said_since(context, 0) == ("Said since:\nAlice: and under 1000?", 1)
    assert said_since(context, 1) == ("", 0)


def test_opening_adds_the_prompt_when_it_is_not_the_last_line_and_later_without_words() -> None:
    context = {"kind": "timeline", "lines": [line("hello")], "later": [line("again"), line("and again")]}
    assert opening(context, "pressed: option 2")[0].text == "Alice: hello\n\npressed: option 2"
    assert said_since(context, 1) == ("Alice: and again", 1)


def test_a_draft_answer_overtaken_by_later_words_is_left_out_and_the_words_follow() -> None:
    from engine.core.messages import (
        HeardStep,
        ModelStep,
        ToolCall,
        ToolCallStep,
        ToolResultStep,
        conversation,
        heard,
    )

    first = opening({"lines": [line("which is lightest?")]}, "which is lightest?")
    steps = [
        ModelStep(tool_calls=(ToolCall("c1", "search_site", {"query": "light"}),)),
        ToolCallStep(ToolCall("c1", "search_site", {"query": "light"})),
        ToolResultStep("c1", "The Air is 1.2 kg."),
        ModelStep(text="The Air."),                       # a draft: the asker said more before it went out
        HeardStep("Said since:\nAlice: and under 1000?", 1),
        ModelStep(text="The Air, and it is under 1000."),
    ]
    messages = conversation(first, steps)
    assert [(m.role, m.text) for m in messages] == [
        ("user", "Alice: which is lightest?"),
        ("assistant", ""),
        ("tool", "The Air is 1.2 kg."),
        ("user", "Said since:\nAlice: and under 1000?"),
        ("assistant", "The Air, and it is under 1000."),
    ]
    assert heard(steps) == 1
