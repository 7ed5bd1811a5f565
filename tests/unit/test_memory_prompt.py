"""What a run's opening carries for each memory (engine/core/memory.py), pure: none drops the conversation and
keeps the question, thread is the conversation as handed over, person puts the earlier questions above it
(oldest first, the newest that fit), person+recall the recalled memories too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.core.memory import Asked, Recalled, with_memory
from engine.core.prompt import opening

T0 = datetime(2026, 5, 1, tzinfo=UTC)
CONTEXT = {"kind": "timeline", "header": "What was said:", "lines": [{"name": "ann", "said": "hi there"}]}
EARLIER = [Asked(f"question {n}", f"answer {n}", T0 + timedelta(days=n)) for n in range(3, 0, -1)]  # newest first


def text(context: dict[str, object], prompt: str = "and now?") -> str:
    return opening(context, prompt)[0].text


def test_none_is_the_question_alone() -> None:
    assert text(with_memory(CONTEXT, "none", earlier=EARLIER)) == "and now?"
    event = {"kind": "event", "event": "order.paid", "facts": {"id": 7}, "lines": [{"name": "x", "said": "y"}]}
    assert "order.paid" in text(with_memory(event, "none")) and "x: y" not in text(with_memory(event, "none"))


def test_thread_is_the_conversation_untouched() -> None:
    assert with_memory(CONTEXT, "thread", earlier=EARLIER) is CONTEXT


def test_person_puts_the_earlier_questions_above_the_conversation_oldest_first() -> None:
    got = text(with_memory(CONTEXT, "person", earlier=EARLIER, recalled=[Recalled("I like tea", T0)]))
    assert got.index("question 1") < got.index("question 2") < got.index("question 3") < got.index("hi there")
    assert "I like tea" not in got  # recalled memories are person+recall's


def test_person_recall_adds_what_was_recalled_and_the_budget_keeps_the_newest() -> None:
    got = text(with_memory(CONTEXT, "person+recall", earlier=EARLIER, recalled=[Recalled("I like tea", T0)],
                           words={"recalled": "Told before:"}))
    assert "Told before:\n- 2026-05-01: I like tea" in got
    many = [Asked(f"q{n} " + "x" * 600, "a" * 600, T0) for n in range(100, 0, -1)]
    kept = text(with_memory({}, "person", earlier=many, tokens=2000))
    assert "q100 " in kept and "q1 " not in kept and len(kept) <= 2000 * 4
