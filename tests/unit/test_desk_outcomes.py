"""The desk's outcome figures, one test per definition (docs/desk.md, "Outcome figures"): judged from recorded
events alone, at a given ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from appservice.desk.outcomes import PEOPLE, Happened, figures, judge, report
from appservice.desk.said import phrases, says_it_hands_over

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=30)


def story(*steps: tuple[float, str] | tuple[float, str, str | None] | tuple[float, str, str | None, str | None],
          conversation: int = 1, inbox: int = 1) -> list[Happened]:
    """(seconds after T0, kind[, cause[, bot]]) …"""
    out = []
    for step in steps:
        at, kind = step[0], step[1]
        cause = step[2] if len(step) > 2 else None  # type: ignore[misc]
        bot = step[3] if len(step) > 3 else None  # type: ignore[misc]
        out.append(Happened(conversation, inbox, kind, T0 + timedelta(seconds=at), cause=cause, bot=bot,
                            value=int(cause) if kind == "rated" and cause else None))
    return out


DAY = 86_400.0


def test_a_bot_answer_then_a_confirmed_resolution_is_the_bots_alone() -> None:
    v = judge(story((0, "started", None, "clerk"), (4, "bot_answered", None, "clerk"), (60, "resolved", "confirmed")),
              now=NOW)
    assert (v.bot, v.bot_alone, v.handed, v.resolved, v.reopened) == ("clerk", True, None, "confirmed", False)
    assert v.first_answer == 4.0 and v.to_person is None


def test_a_handoff_after_a_failure_is_not_a_bot_resolution() -> None:
    v = judge(story((0, "started", None, "clerk"), (5, "handed", "failure", "clerk"), (65, "person_answered"),
                    (200, "resolved", "assumed")), now=NOW)
    assert (v.handed, v.resolved, v.bot_alone) == ("failure", "people", False)
    assert v.to_person == 60.0
    assert figures([v]).confirmed == figures([v]).assumed == 0 and figures([v]).resolved_by_people == 1


def test_a_reopened_conversation_un_counts_its_assumed_resolution() -> None:
    v = judge(story((0, "started", None, "clerk"), (3, "bot_answered", None, "clerk"), (900, "resolved", "assumed"),
                    (2 * DAY, "reopened")), now=NOW)
    assert (v.resolved, v.reopened) == (None, True)
    f = figures([v])
    assert (f.assumed, f.reopened) == (0, 1)


def test_resolved_again_after_reopening_counts_by_its_last_resolution() -> None:
    v = judge(story((0, "started", None, "clerk"), (3, "bot_answered", None, "clerk"), (900, "resolved", "assumed"),
                    (1000, "reopened"), (1003, "bot_answered", None, "clerk"), (1100, "resolved", "confirmed")),
              now=NOW)
    assert (v.resolved, v.reopened, v.bot_alone) == ("confirmed", True, True)


def test_a_conversation_reopened_on_day_six_is_not_durable() -> None:
    v = judge(story((0, "started"), (10, "bot_answered", None, "clerk"), (60, "resolved", "assumed"),
                    (60 + 6 * DAY, "reopened"), (61 + 6 * DAY, "resolved", "staff")), now=T0 + timedelta(days=20))
    assert v.durable is False


def test_a_resolution_that_held_seven_days_is_durable_and_a_younger_one_is_not_judged() -> None:
    held = story((0, "started"), (10, "bot_answered", None, "clerk"), (60, "resolved", "confirmed"),
                 (60 + 8 * DAY, "reopened"))  # reopened on day 8: the first resolution had held its 7 days
    assert judge(held, now=T0 + timedelta(days=9)).durable is True
    young = story((0, "started"), (10, "bot_answered", None, "clerk"), (60, "resolved", "confirmed"), conversation=2)
    assert judge(young, now=T0 + timedelta(days=6)).durable is None
    f = figures([judge(held, now=T0 + timedelta(days=9)), judge(young, now=T0 + timedelta(days=6))])
    assert (f.durable, f.durable_judged) == (1, 1)
    assert judge(young, now=T0 + timedelta(days=3), durable_days=2).durable is True


def test_handoffs_are_counted_once_by_their_first_cause() -> None:
    verdicts = [
        judge(story((0, "started", None, "clerk"), (5, "handed", "contact", "clerk"), conversation=1), now=NOW),
        judge(story((0, "started", None, "clerk"), (5, "handed", "bot", "clerk"), (9, "handed", "staff"),
                    conversation=2), now=NOW),
        judge(story((0, "started", None, "clerk"), (5, "handed", "said", "clerk"), conversation=3), now=NOW),
        judge(story((0, "started", None, "clerk"), (5, "handed", "failure", "clerk"), conversation=4), now=NOW),
        judge(story((0, "started", None, "clerk"), (5, "person_answered"), conversation=5), now=NOW),
    ]
    f = figures(verdicts)
    assert f.handed == 4
    assert dict(f.handed_by) == {"contact": 1, "bot": 1, "said": 1, "failure": 1, "staff": 0}
    assert f.bot_alone == 0  # nobody answered by a bot alone: conversation 5 was a person's


def test_a_staff_resolution_of_a_bots_conversation_is_peoples() -> None:
    v = judge(story((0, "started", None, "clerk"), (3, "bot_answered", None, "clerk"), (50, "resolved", "staff")),
              now=NOW)
    assert v.resolved == "people" and v.bot_alone  # the bot alone answered; a person closed it


def test_times_are_nearest_rank_over_the_conversations_that_have_them() -> None:
    verdicts = [judge(story((0, "started"), (s, "bot_answered", None, "b"), conversation=n), now=NOW)
                for n, s in enumerate([1, 2, 3, 4, 100], start=1)]
    verdicts.append(judge(story((0, "started"), conversation=9), now=NOW))  # never answered: not in the spread
    spread = figures(verdicts).first_answer
    assert spread is not None and (spread.count, spread.p50, spread.p90) == (5, 3.0, 100.0)


def test_ratings_count_once_with_their_mean_and_stars() -> None:
    verdicts = [judge(story((0, "started"), (5, "rated", "5"), (6, "rated", "1"), conversation=1), now=NOW),
                judge(story((0, "started"), (5, "rated", "2"), conversation=2), now=NOW)]
    f = figures(verdicts)
    assert (f.ratings, f.rating_mean, f.rating_counts) == (2, 3.5, (0, 1, 0, 0, 1))


def test_the_report_groups_by_inbox_and_by_the_bot_that_first_answered() -> None:
    events = [*story((0, "started", None, "clerk"), (3, "bot_answered", None, "guide"), conversation=1),
              *story((0, "started"), (9, "person_answered"), conversation=2),
              *story((0, "started", None, "clerk"), conversation=3, inbox=2)]
    made = report(events, inboxes=[1, 2, 3], since=T0, until=NOW, now=NOW)
    assert {k: f.conversations for k, f in made.inboxes.items()} == {1: 2, 2: 1, 3: 0}
    assert {k: f.conversations for k, f in made.bots.items()} == {(1, "guide"): 1, (1, PEOPLE): 1, (2, "clerk"): 1}
    assert made.inboxes[1].json()["time_to_first_answer"] == {"count": 2, "p50_seconds": 3.0, "p90_seconds": 9.0}


def test_a_conversation_with_nothing_recorded_is_refused() -> None:
    with pytest.raises(ValueError):
        judge([], now=NOW)


@pytest.mark.parametrize(("text", "caught"), [
    ("I'll transfer you to a colleague now.", True),
    ("Let me  pass you to a\nperson who can help.", True),
    ("A colleague will pick this up shortly.", True),
    ("I\u2019m handing you over to our team.", True),
    ("Your transfer went through yesterday.", False),
    ("We open at nine.", False),
])
def test_saying_a_handoff_is_caught_by_the_sites_phrases(text: str, caught: bool) -> None:
    listed = phrases("transfer you | pass you to a | a colleague will pick this up | handing you over | ")
    assert says_it_hands_over(text, listed) is caught
