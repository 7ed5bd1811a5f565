"""``!rules`` parsed and a rule's phrase matched (appservice/social/words.py), and a bridge read off its state
(appservice/social/bridged.py): pure, tables of cases."""

from __future__ import annotations

import time

import pytest

from appservice.config import SocialBridge
from appservice.kinds import KINDS
from appservice.matrix.claimers.admin_words import Bad
from appservice.social.bridged import guest, read_bridge
from appservice.social.words import (
    AddRule,
    Auto,
    Change,
    ListRules,
    Usage,
    line_key,
    matches,
    parse,
    phrase_refusal,
    words_of,
)
from engine.content import compile_sources

BOTS = {"replier": "Replier", "helper": "Helper"}


@pytest.mark.parametrize(("phrase", "line", "expected"), [
    ("refund", "Where is my REFUND?", True),
    ("refund", "I was refunded twice", False),  # whole words only
    ("where is my refund", "hi, where   is my refund!!", True),
    ("where is my refund", "where is my order refund", False),  # side by side, in order
    ("my refund", "refund my", False),
    ("Ölçü", "ölçü lütfen", True),  # case-insensitive beyond ASCII
    ("refund", "", False),
])
def test_a_phrase_matches_whole_words_whatever_their_case(phrase: str, line: str, expected: bool) -> None:
    assert matches(words_of(phrase), words_of(line)) is expected


def test_matching_is_linear_in_the_line() -> None:
    line = words_of("refund " * 200_000)
    started = time.monotonic()
    assert not matches(words_of("refund refund refund refund refund refund refund refund refund refund refund x"), line)
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(("phrase", "why"), [
    ("", "empty"),
    ("  ", "empty"),
    ("ab", "shorter than 3"),
    ("the", "only common words"),
    ("where is my", "only common words"),
    ("!!!", "only punctuation"),
    ("x" * 201, "at most 200"),
])
def test_a_phrase_that_would_match_everything_is_refused(phrase: str, why: str) -> None:
    refused = phrase_refusal(phrase)
    assert refused is not None and why in refused


def test_a_real_phrase_is_taken() -> None:
    assert phrase_refusal("refund") is None
    assert phrase_refusal("where is my order") is None


@pytest.mark.parametrize(("text", "expected"), [
    ("!rules", ListRules()),
    ("!rules list", ListRules()),
    ("!rules help", Usage()),
    ('!rules add replier "where is my refund" on dm to private', AddRule("replier", "where is my refund", "dm", "private")),
    ("!rules add Replier “refund” to public on comment", AddRule("replier", "refund", "comment", "public")),
    ('!rules add replier "refund" on dm to private in !abc:example.org',
     AddRule("replier", "refund", "dm", "private", "!abc:example.org")),
    ("!rules pause 3", Change("pause", 3)),
    ("!rules resume #3", Change("resume", 3)),
    ("!rules remove 3", Change("remove", 3)),
    ("!rules history 3", Change("history", 3)),
    ("!rules auto 3 on", Auto(3, True)),
    ("!rules auto 3 off", Auto(3, False)),
    ("!rules auto 3", Auto(3, None)),
])
def test_rules_lines_parse_into_their_fields(text: str, expected: object) -> None:
    assert parse(text, BOTS) == expected


@pytest.mark.parametrize(("text", "field", "allowed"), [
    ('!rules add nobody "refund" on dm to private', "bot", "replier, helper"),
    ('!rules add replier "" on dm to private', "phrase", "a word or phrase"),
    ('!rules add replier "the" on dm to private', "phrase", "a word or phrase"),
    ("!rules add replier refund on dm to private", "phrase", "a word or phrase"),
    ('!rules add replier "refund" on email to private', "on", "dm, comment, group"),
    ('!rules add replier "refund" on dm to everyone', "to", "private, public"),
    ('!rules add replier "refund" on dm', "to", "private, public"),
    ('!rules add replier "refund" to private', "on", "dm, comment, group"),
    ('!rules add replier "refund" on dm to private as @alice', "field", "on, to, in"),
    ('!rules add replier "refund" on dm to private in general', "in", "a bridged room's id"),
    ("!rules pause x", "id", "a rule's number"),
    ("!rules auto 3 maybe", "auto", "on, off"),
    ("!rules frobnicate", "sub-command", "list, add"),
])
def test_a_bad_field_says_what_it_accepts(text: str, field: str, allowed: str) -> None:
    bad = parse(text, BOTS)
    assert isinstance(bad, Bad), bad
    assert bad.field == field
    assert allowed in bad.allowed


def test_a_replayed_line_has_the_same_key_and_another_conversation_another() -> None:
    one = line_key("!r:x", None, "@fb_alice:x", "Where is my refund?")
    assert one == line_key("!r:x", None, "@fb_alice:x", "where is my   REFUND")
    assert one != line_key("!r:x", "$thread", "@fb_alice:x", "Where is my refund?")
    assert one != line_key("!r:x", None, "@fb_bob:x", "Where is my refund?")


def test_a_bridge_is_read_off_its_state() -> None:
    dm = read_bridge("!r:x", {"bridgebot": "@fb_bot:x", "protocol": {"id": "fakebook", "displayname": "Fakebook"},
                              "channel": {"id": "c1", "displayname": "Alice"}, "com.beeper.room_type": "dm"},
                     direct=False)
    assert dm is not None
    assert (dm.bridge, dm.protocol, dm.network, dm.channel, dm.conversation, dm.known_by) == (
        "@fb_bot:x", "fakebook", "Fakebook", "Alice", "dm", "state")
    post = read_bridge("!r:x", {"protocol": {"id": "fakebook"}, "network": {"id": "n", "displayname": "Fakebook EU"},
                                "com.beeper.room_type": "comments"}, direct=True)
    assert post is not None and (post.conversation, post.network, post.bridge) == ("comments", "Fakebook EU", "fakebook")
    assert read_bridge("!r:x", {"protocol": {"id": "fakebook"}}, direct=True).conversation == "dm"  # type: ignore[union-attr]
    assert read_bridge("!r:x", {"protocol": {"id": "fakebook"}}, direct=False).conversation == "group"  # type: ignore[union-attr]
    assert read_bridge("!r:x", {}, direct=False) is None  # an emptied state: no longer bridged


def test_a_guest_is_a_bridge_puppet_never_one_of_our_people() -> None:
    bridges = (SocialBridge(users="@fakebridge_.*:localhost"),)
    assert guest("@fakebridge_alice:localhost", bridges)
    assert not guest("@alice:localhost", bridges)
    assert not guest("@fakebridge_alice:elsewhere", bridges)


def test_a_social_bot_keeps_no_memory_of_a_guest() -> None:
    text = "---\nname: R\nsurfaces: [social]\nmemory: person\n---\nBe kind.\n"
    errors = compile_sources({"bots/r.md": text}, kinds=KINDS, server_name="localhost")
    assert isinstance(errors, list) and len(errors) == 1
    assert "remembers a person" in str(errors[0]) and "bots/r.md" in str(errors[0])
    fine = compile_sources({"bots/r.md": text.replace("memory: person", "memory: thread")}, kinds=KINDS,
                           server_name="localhost")
    assert not isinstance(fine, list)
