"""The desk's outcomes on a real PostgreSQL, over real HTTP (issue 31): what each thing a contact, a bot or the
staff does records (``desk_outcomes``), the bot's handoff by its tool and by its words, the one rating, and the
figures as the staff API says them — to a staff key of the inbox only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from appservice.desk.metrics import DeskGauges
from appservice.metrics import Metrics
from tests.desk.conftest import HANDOFF_KEY, STAFF_KEY, Contact, DeskRig

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]

REPORT = "/api/v1/accounts/1/reports/outcomes"


async def recorded(desk: DeskRig, conversation: int) -> list[tuple[Any, ...]]:
    rows = await desk.db.pool.fetch("SELECT kind, cause, bot FROM desk_outcomes WHERE conversation_id = $1 ORDER BY id",
                                    conversation)
    return [tuple(r) for r in rows]


async def state(desk: DeskRig, conversation: int) -> dict[str, Any]:
    row = await desk.row("SELECT status, handler_bot, assignee, bot_off_at IS NOT NULL AS bot_off, resolution "
                         "FROM desk_conversations WHERE id = $1", conversation)
    return dict(row)


async def figures(desk: DeskRig, inbox: str, key: str = STAFF_KEY, **query: str) -> dict[str, Any]:
    found = await desk.call("GET", REPORT + "?" + "&".join(f"{k}={v}" for k, v in {"inbox": inbox, **query}.items()),
                            staff=key)
    [row] = found["inboxes"]
    assert row["inbox"] == inbox
    return dict(row)


async def answered(desk: DeskRig, who: Contact, words: str, answer: str) -> tuple[int, dict[str, Any]]:
    conversation = await desk.conversation(who)
    await desk.say(who, conversation, words, script=[{"text": answer}])
    await desk.work()
    last = (await desk.messages(who, conversation))[-1]
    assert last["content"] == answer
    return conversation, last


async def test_a_bot_answer_confirmed_by_the_contact_is_a_bot_resolution_asked_for_one_rating(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation, answer = await answered(desk, ann, "When do you open?", "At nine.")
    await desk.call("POST", f"{desk.base(ann)}/conversations/{conversation}/messages/{answer['id']}/feedback",
                    token=ann.token, body={"helped": True})
    await desk.call("POST", f"{desk.base(ann)}/conversations/{conversation}/toggle_status", token=ann.token,
                    body={"status": "resolved"})
    assert await recorded(desk, conversation) == [("started", None, "clerk"), ("bot_answered", None, "clerk"),
                                                  ("resolved", "confirmed", None)]
    # Asked once how it went, as buttons 1-5; the press is the rating, and it is taken once.
    [question] = [m for m in await desk.messages(ann, conversation) if m["content_attributes"].get("rating")]
    assert [i["value"] for i in question["content_attributes"]["items"]] == ["1", "2", "3", "4", "5"]
    path = f"{desk.base(ann)}/conversations/{conversation}/messages/{question['id']}"
    await desk.call("PATCH", path, token=ann.token, body={"submitted_values": [{"value": "4"}]})
    await desk.call("PATCH", path, token=ann.token, body={"submitted_values": [{"value": "1"}]}, expect=409)
    assert (await state(desk, conversation))["status"] == "resolved"  # a rating is not words: nothing reopens
    shown = await figures(desk, "always")
    assert (shown["conversations"], shown["bot_alone"], shown["resolved"]) == (
        1, 1, {"confirmed": 1, "assumed": 0, "by_people": 0})
    assert shown["rating"] == {"count": 1, "mean": 4.0, "by_stars": {"1": 0, "2": 0, "3": 0, "4": 1, "5": 0}}
    assert shown["time_to_first_answer"]["count"] == 1
    # Reopened and resolved again: asked for no second rating, and the reopening is counted.
    await desk.say(ann, conversation, "One more thing", script=[{"text": "Sure."}])
    await desk.work()
    await desk.call("POST", f"{desk.base(ann)}/conversations/{conversation}/toggle_status", token=ann.token,
                    body={"status": "resolved"})
    assert len([m for m in await desk.messages(ann, conversation) if m["content_attributes"].get("rating")]) == 1
    shown = await figures(desk, "always")
    assert (shown["reopened"], shown["resolved"]["confirmed"]) == (1, 1)


async def test_talk_to_a_person_then_a_staff_answer_is_a_contacts_handoff_with_its_time_to_a_person(
        desk: DeskRig) -> None:
    bo = await desk.contact("always")
    conversation, _ = await answered(desk, bo, "Where is my parcel?", "Let me look.")
    await desk.call("POST", f"{desk.base(bo)}/conversations/{conversation}/toggle_status", token=bo.token,
                    body={"status": "open"})
    await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY,
                    body={"content": "It is on its way.", "sender_name": "Sam"})
    await desk.call("POST", desk.staff_path(conversation, "/toggle_status"), staff=STAFF_KEY,
                    body={"status": "resolved"})
    assert await recorded(desk, conversation) == [
        ("started", None, "clerk"), ("bot_answered", None, "clerk"), ("handed", "contact", "clerk"),
        ("person_answered", None, None), ("resolved", "staff", None)]
    shown = await figures(desk, "always")
    assert shown["handed"] == 1 and shown["handed_by"]["contact"] == 1
    assert shown["bot_alone"] == 0
    assert shown["resolved"] == {"confirmed": 0, "assumed": 0, "by_people": 1}
    assert shown["time_to_a_person"]["count"] == 1


async def test_a_failed_bot_hands_over_by_failure_and_its_later_resolution_is_peoples(desk: DeskRig) -> None:
    cy = await desk.contact("always")
    conversation = await desk.conversation(cy)
    await desk.say(cy, conversation, "Help?", script=[{"error": "the provider is down", "error_class": "provider"}])
    await desk.work()
    assert (await state(desk, conversation))["bot_off"] is True
    await desk.call("POST", desk.staff_path(conversation, "/toggle_status"), staff=STAFF_KEY,
                    body={"status": "resolved"})
    kinds = await recorded(desk, conversation)
    assert ("handed", "failure", "clerk") in kinds
    shown = await figures(desk, "always")
    assert shown["handed_by"]["failure"] == 1
    assert shown["resolved"] == {"confirmed": 0, "assumed": 0, "by_people": 1}


async def test_staff_taking_a_bots_conversation_is_the_staffs_handoff(desk: DeskRig) -> None:
    di = await desk.contact("always")
    conversation, _ = await answered(desk, di, "Can I change my order?", "Which order?")
    await desk.call("POST", desk.staff_path(conversation, "/assignments"), staff=STAFF_KEY, body={"assignee_id": "sam"})
    assert ("handed", "staff", "clerk") in await recorded(desk, conversation)


async def test_a_bot_hands_over_by_its_tool_says_its_last_words_and_the_staff_see_why(desk: DeskRig) -> None:
    ed = await desk.contact("handoff")
    conversation = await desk.conversation(ed)
    await desk.say(ed, conversation, "I want my money back", script=[
        {"tool_calls": [{"id": "h1", "name": "hand_to_people", "arguments": {"reason": "A refund is asked for."}}]},
        {"text": "A colleague takes it from here."},
    ])
    await desk.work()
    assert await state(desk, conversation) == {"status": "open", "handler_bot": "passer", "assignee": None,
                                               "bot_off": True, "resolution": None}
    assert await recorded(desk, conversation) == [("started", None, "passer"), ("handed", "bot", "passer"),
                                                  ("bot_answered", None, "passer")]
    seen = await desk.messages(ed, conversation)
    assert seen[-1]["content"] == "A colleague takes it from here." and seen[-1]["private"] is False
    assert any(m["message_type"] == "activity" for m in seen)  # told a person will pick it up
    staff = await desk.call("GET", desk.staff_path(conversation, "/messages"), staff=HANDOFF_KEY)
    [why] = [m for m in staff["payload"] if m["content_attributes"].get("handed_over")]
    assert (why["content"], why["private"]) == ("A refund is asked for.", True)
    assert not [m for m in seen if m["content_attributes"].get("handed_over")]  # the contact never sees the note
    shown = await figures(desk, "handoff", HANDOFF_KEY)
    assert shown["handed_by"]["bot"] == 1 and shown["handed_by"]["said"] == 0


async def test_a_bot_that_says_it_hands_over_without_its_tool_is_handed_over_and_counted_apart(desk: DeskRig) -> None:
    fay = await desk.contact("always")
    conversation = await desk.conversation(fay)
    await desk.say(fay, conversation, "I am upset", script=[{"text": "I'll transfer you to a colleague right away."}])
    await desk.work()
    said, told = (await desk.messages(fay, conversation))[-2:]
    assert (said["content"], said["private"]) == ("I'll transfer you to a colleague right away.", False)
    assert told["message_type"] == "activity"  # and the desk makes it true: a person will pick it up
    assert (await state(desk, conversation))["bot_off"] is True
    assert ("handed", "said", "clerk") in await recorded(desk, conversation)
    shown = await figures(desk, "always")
    assert shown["handed_by"]["said"] == 1 and shown["handed_by"]["bot"] == 0


async def test_the_tool_on_a_conversation_people_already_have_changes_nothing(desk: DeskRig) -> None:
    gus = await desk.contact("handoff")
    conversation = await desk.conversation(gus)
    await desk.call("POST", desk.staff_path(conversation, "/assignments"), staff=HANDOFF_KEY,
                    body={"assignee_id": "sam"})
    await desk.call("POST", desk.staff_path(conversation, "/toggle_status"), staff=HANDOFF_KEY,
                    body={"status": "pending"})  # back to the bot
    await desk.say(gus, conversation, "hello", script=[
        {"tool_calls": [{"id": "h1", "name": "hand_to_people", "arguments": {"reason": ""}}]},
        {"text": "ok", "echo": True},
    ])
    await desk.work()
    last = (await desk.messages(gus, conversation))[-1]
    assert "reason" in last["content"]  # an empty reason is refused, and the model told why
    assert (await state(desk, conversation))["bot_off"] is False


async def test_the_figures_need_a_staff_key_of_the_inbox_and_count_a_window_of_starts(desk: DeskRig) -> None:
    hal = await desk.contact("always")
    conversation, _ = await answered(desk, hal, "Hi", "Hello.")
    await desk.call("GET", REPORT, expect=401)
    await desk.call("GET", REPORT, staff="wrong-" + "k" * 20, expect=401)
    await desk.call("GET", REPORT + "?inbox=handoff", staff=STAFF_KEY, expect=404)  # not an inbox this key reaches
    await desk.call("GET", REPORT + "?inbox=always&since=soon", staff=STAFF_KEY, expect=422)
    assert (await figures(desk, "always"))["conversations"] == 1
    # Started 40 days ago (moved back in time: every recorded moment of it): outside the default 30 days.
    await desk.db.pool.execute("UPDATE desk_outcomes SET at = at - interval '40 days' WHERE conversation_id = $1",
                               conversation)
    assert (await figures(desk, "always"))["conversations"] == 0
    assert (await figures(desk, "always", since="60d"))["conversations"] == 1


async def test_a_resolution_reopened_on_day_six_is_not_durable_as_the_api_counts_it(desk: DeskRig) -> None:
    ivy = await desk.contact("always")
    conversation, _ = await answered(desk, ivy, "Opening hours?", "Nine to five.")
    await desk.call("POST", f"{desk.base(ivy)}/conversations/{conversation}/toggle_status", token=ivy.token,
                    body={"status": "resolved"})
    await desk.say(ivy, conversation, "And on Sundays?", script=[{"text": "Closed."}])
    await desk.work()
    # Everything moved back: started 10 days ago, the contact came back six days after the resolution.
    await desk.db.pool.execute(
        "UPDATE desk_outcomes SET at = at - CASE WHEN kind = 'reopened' OR id > (SELECT id FROM desk_outcomes "
        "WHERE conversation_id = $1 AND kind = 'reopened') THEN interval '4 days' ELSE interval '10 days' END "
        "WHERE conversation_id = $1", conversation)
    shown = await figures(desk, "always")
    assert shown["durable"] == {"durable": 0, "judged": 1}
    assert shown["reopened"] == 1


async def test_metrics_show_the_figures_by_inbox_and_bot(desk: DeskRig) -> None:
    jo = await desk.contact("always")
    await answered(desk, jo, "Hello?", "Hello.")
    metrics = Metrics()
    metrics.read_also(DeskGauges(metrics.registry, desk.service.outcomes).read)
    text = (await metrics.scrape(desk.db)).decode()
    assert 'summon_desk_conversations{bot="*",inbox="always"} 1.0' in text
    assert 'summon_desk_bot_alone{bot="clerk",inbox="always"} 1.0' in text
    assert 'summon_desk_handed{bot="*",cause="failure",inbox="always"} 0.0' in text


def desk_report(config: Path, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SUMMON_DESK_STAFF_KEY"}
    if key is not None:
        env["SUMMON_DESK_STAFF_KEY"] = key
    return subprocess.run([sys.executable, "-m", "appservice", "-c", str(config), "desk", "report", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60, env=env)


async def test_summon_desk_report_prints_the_figures_for_a_staff_key(desk: DeskRig, dsn: str, tmp_path: Path) -> None:
    kim = await desk.contact("always")
    await answered(desk, kim, "Do you ship abroad?", "We do.")
    config = tmp_path / "summon.yaml"
    config.write_text(yaml.safe_dump({
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:2", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": dsn}, "desk": desk.service.config.model_dump(mode="json"),
    }))
    table = desk_report(config, "--inbox", "always", key=STAFF_KEY)
    assert table.returncode == 0, table.stderr
    [row] = [line for line in table.stdout.splitlines() if line.startswith("always")]
    assert row.split()[:3] == ["always", "1", "1"]  # one conversation, one handled by the bot alone (100%)
    assert any(line.strip().startswith("clerk") for line in table.stdout.splitlines())
    shown = desk_report(config, "--json", "--since", "7d", key=STAFF_KEY)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert {i["inbox"]: i["conversations"] for i in data["inboxes"]}["always"] == 1
    assert "handoff" not in {i["inbox"] for i in data["inboxes"]}  # another key's inbox
    refused = desk_report(config)
    assert refused.returncode == 2 and "staff key" in refused.stderr
    assert desk_report(config, "--inbox", "handoff", key=STAFF_KEY).returncode == 2


SUMMARY_PROMPT = "say nothing you do not see above."  # how the kit's summary_prompt ends: the book's key


async def summaries(desk: DeskRig, conversation: int, key: str = STAFF_KEY) -> list[dict[str, Any]]:
    staff = await desk.call("GET", desk.staff_path(conversation, "/messages"), staff=key)
    return [m for m in staff["payload"] if m["content_attributes"].get("summary")]


async def test_a_handoff_gets_the_bots_summary_at_the_top_for_the_staff_alone(desk: DeskRig) -> None:
    kai = await desk.contact("always")
    conversation, _ = await answered(desk, kai, "My parcel never came", "Sorry to hear it. Which order?")
    await desk.say(kai, conversation, "Order 1234, and I want a refund", script=[{"text": "Let me check."}])
    await desk.work()
    # The summary run is asked by nobody, about the contact, and not the conversation's live run.
    from tests.book import BOOK
    BOOK.say(SUMMARY_PROMPT, [{"text": "Kai's parcel (order 1234) never came; a refund is asked for. Still open: "
                                       "the refund."}])
    await desk.call("POST", f"{desk.base(kai)}/conversations/{conversation}/toggle_status", token=kai.token,
                    body={"status": "open"})
    run = await desk.row("SELECT asked_by, subject, status FROM agent_runs WHERE place = $1 AND trigger_event LIKE "
                         "'%:summary:%'", f"desk:{conversation}")
    assert (run["asked_by"], run["subject"], run["status"]) == (None, f"contact:{kai.id}", "queued")
    await desk.work()
    [summary] = await summaries(desk, conversation)
    assert summary["content"].startswith("Kai's parcel (order 1234) never came")
    assert (summary["private"], summary["bot"], summary["content_attributes"]["summary"]) == (True, "clerk", "bot")
    shown = await desk.call("GET", desk.staff_path(conversation), staff=STAFF_KEY)
    assert shown["meta"]["summary"]["content"] == summary["content"]
    public = await desk.shown(kai, conversation)
    assert "summary" not in public["meta"]
    assert not [m for m in await desk.messages(kai, conversation) if m["content_attributes"].get("summary")]
    told = [m["content"] for m in await desk.messages(kai, conversation) if m["message_type"] == "activity"]
    assert any("no need to repeat" in t for t in told)


async def test_a_failed_bot_leaves_the_desks_own_summary_from_the_record(desk: DeskRig) -> None:
    lou = await desk.contact("always")
    conversation, _ = await answered(desk, lou, "Can I change my address?", "Yes: which order?")
    await desk.say(lou, conversation, "Order 77, to Cork", script=[{"error": "down", "error_class": "provider"}])
    await desk.work()
    [summary] = await summaries(desk, conversation)
    assert summary["content_attributes"]["summary"] == "desk"
    assert summary["content"] == ("Summary (written by the desk): Asked: Can I change my address? · Answered: Yes: "
                                  "which order? · Still open: Order 77, to Cork · Tickets: nothing")


async def test_a_summary_run_that_fails_is_replaced_by_the_desks(desk: DeskRig) -> None:
    mo = await desk.contact("always")
    conversation, _ = await answered(desk, mo, "Is it in stock?", "It is.")
    from tests.book import BOOK
    BOOK.say(SUMMARY_PROMPT, [{"error": "the provider is down", "error_class": "provider"}])
    await desk.call("POST", f"{desk.base(mo)}/conversations/{conversation}/toggle_status", token=mo.token,
                    body={"status": "open"})
    await desk.work()
    [summary] = await summaries(desk, conversation)
    assert summary["content_attributes"]["summary"] == "desk" and "Asked: Is it in stock?" in summary["content"]


@pytest.mark.desk_config(handoff_summary=False)
async def test_no_summary_when_the_desk_says_not(desk: DeskRig) -> None:
    ned = await desk.contact("always")
    conversation, _ = await answered(desk, ned, "Hello", "Hi.")
    await desk.call("POST", f"{desk.base(ned)}/conversations/{conversation}/toggle_status", token=ned.token,
                    body={"status": "open"})
    await desk.work()
    assert await summaries(desk, conversation) == []
