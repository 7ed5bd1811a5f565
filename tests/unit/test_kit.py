"""The kit's own content (engine/content/kit/): what it ships, that it is off until a site turns it on, and how a
site replaces or extends it."""

from __future__ import annotations

from pathlib import Path

import pytest

from appservice.desk.kind import OFFER, answers_on_desk
from appservice.kinds import KINDS
from engine.content import Bot, Registry, compile_sources
from engine.content.files import KIT_DIR, check, read_kit
from engine.core.messages import ENDINGS

SERVER = "example.org"
HARM_SKILLS = ["handing-over", "i-dont-know", "no-promises", "privacy"]


def bot(front: str, body: str = "Be helpful.") -> str:
    return f"---\n{front}---\n{body}\n"


def site(sources: dict[str, str]) -> Registry:
    result = compile_sources(sources, kinds=KINDS, server_name=SERVER, kit=read_kit())
    assert isinstance(result, Registry), "\n".join(map(str, result))
    return result


def test_the_kit_ships_the_desk_and_builder_bots_four_skills_and_its_words() -> None:
    # Issue 14 added the member-bot builder (docs/member-bots.md), off like the desk.
    assert sorted(read_kit()) == ["bots/builder.md", "bots/desk.md", *[f"skills/{name}.md" for name in HARM_SKILLS],
                                  "strings.md"]


def test_the_kit_compiles_on_its_own_and_its_bot_is_off() -> None:
    registry = site({})
    assert list(registry.bots) == []  # off: nothing is live until a site says so
    assert list(registry.kit_bots) == ["builder", "desk"]
    assert list(registry.skills) == HARM_SKILLS
    desk = registry.kit_bots["desk"]
    assert desk.surfaces == ("desk",) and OFFER.of(desk) == "off" and answers_on_desk(desk) == "draft"
    assert desk.skills == "all" and desk.limits.per
    assert desk.source_path == "kit/bots/desk.md"
    assert all(registry.skills[name].description for name in HARM_SKILLS)
    assert registry.skills["handing-over"].tools == ("raise_ticket",)


def test_the_kit_has_words_for_every_ending() -> None:
    registry = site({})
    assert set(registry.strings.section("endings")) == set(ENDINGS)
    assert registry.kit_bots["desk"].endings == dict(registry.strings.section("endings"))


def test_a_site_file_of_the_same_name_replaces_the_kits_outright() -> None:
    registry = site(
        {
            "skills/privacy.md": "---\ndescription: Our own privacy rules.\n---\nOurs.\n",
            "bots/desk.md": bot("name: Front desk\nsurfaces: [desk]\n", "Only our words."),
        }
    )
    assert registry.skills["privacy"].description == "Our own privacy rules."
    assert registry.skills["privacy"].source_path == "skills/privacy.md"
    desk = registry.get("desk")
    assert desk is not None and desk.prompt == "Only our words." and desk.tools == () and desk.skills == ()
    assert desk.limits.per == {}  # nothing of the kit's file is merged in


def test_extends_desk_puts_the_kits_conduct_and_tools_first_and_the_sites_words_after() -> None:
    kit_desk = site({}).kit_bots["desk"]
    registry = site(
        {
            "bots/support.md": bot(
                "name: Support\nextends: desk\ntools: [fetch, search_site]\nlimits: {spend: 0.1, per: {day: 1}}\n",
                "We are closed in August.",
            )
        }
    )
    support = registry.get("support")
    assert support is not None and support.extends == "desk"
    assert support.prompt == kit_desk.prompt + "\n\nWe are closed in August."
    assert support.tools == (*kit_desk.tools, "fetch")  # the kit's first, no name twice
    assert support.surfaces == ("desk",) and support.skills == "all" and support.memory == kit_desk.memory
    assert support.limits.steps == kit_desk.limits.steps and support.limits.spend == 0.1
    assert support.limits.per == {**kit_desk.limits.per, "day": 1.0}  # key by key
    assert support.name == "Support" and support.user_id == "@bot_support:example.org"


def test_a_site_turns_the_kits_bot_on_by_extending_it_under_its_own_name() -> None:
    registry = site({"bots/desk.md": "---\nname: Desk\nextends: desk\n---\n"})
    desk = registry.get("desk")
    kit_desk = registry.kit_bots["desk"]
    assert desk is not None and desk.prompt == kit_desk.prompt and desk.tools == kit_desk.tools
    assert desk.source_path == "bots/desk.md"


def test_a_child_may_say_the_default_to_mean_not_the_parents() -> None:
    registry = site({"bots/roomdesk.md": bot("name: R\nextends: desk\nsurfaces: [rooms]\nmemory: thread\n")})
    roomdesk = registry.get("roomdesk")
    assert roomdesk is not None and roomdesk.surfaces == ("rooms",) and roomdesk.memory == "thread"


def test_skills_all_means_every_published_skill_including_one_written_later() -> None:
    helper = bot("name: Helper\nskills: all\n")
    before = site({"bots/helper.md": helper})
    after = site({"bots/helper.md": helper, "skills/refunds.md": "---\ndescription: Refunds.\n---\nHow.\n"})
    assert [s.name for s in before.skills_of(before.bots["helper"])] == HARM_SKILLS
    assert [s.name for s in after.skills_of(after.bots["helper"])] == sorted([*HARM_SKILLS, "refunds"])
    assert after.bots["helper"].skills == "all"


def test_endings_the_kits_then_the_sites_then_the_bots_own() -> None:
    registry = site(
        {
            "strings.md": "## bots\n\n### endings\n\n- failed: Ours failed.\n- cancelled: Ours cancelled.\n",
            "bots/a.md": bot("name: A\nendings:\n  cancelled: A's own.\n"),
            "bots/b.md": bot("name: B\nextends: a\nendings: {nothing_to_add: B's own.}\n"),
        }
    )
    kit_words = site({}).strings.section("endings")
    a, b = registry.bots["a"], registry.bots["b"]
    assert a.endings["out_of_money"] == kit_words["out_of_money"]
    assert a.endings["failed"] == "Ours failed."
    assert a.endings["cancelled"] == "A's own."
    assert b.endings["cancelled"] == "A's own." and b.endings["nothing_to_add"] == "B's own."
    assert set(a.endings) == set(ENDINGS)
    assert b.ending("failed") == "Ours failed."


def test_with_no_words_a_bot_says_nothing() -> None:
    alone = compile_sources({"bots/b.md": bot("name: B\n")}, kinds=KINDS, server_name=SERVER)
    assert isinstance(alone, Registry)
    only: Bot = alone.bots["b"]
    assert only.endings == {} and only.ending("failed") is None


def test_a_broken_kit_file_is_reported_as_the_kits(tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    (kit / "skills").mkdir(parents=True)
    (kit / "skills" / "x.md").write_text("---\ntools: []\n---\nx\n", encoding="utf-8")
    content = tmp_path / "content"
    content.mkdir()
    lines = check(content, SERVER, kinds=KINDS, kit=kit)
    assert lines == [f"{(kit / 'skills' / 'x.md').as_posix()}:1: a skill needs a description: the one line a bot"
                     " sees, saying when to open it (without one it would never be opened)"]


@pytest.mark.parametrize("name", sorted(p.relative_to(KIT_DIR).as_posix() for p in KIT_DIR.rglob("*.md")))
def test_every_kit_file_is_in_the_package_data(name: str) -> None:
    # pyproject ships engine/content/kit/**/*.md; a kit file of another kind would silently not be installed.
    assert name.endswith(".md")


def test_a_site_turns_the_builder_on_and_it_hosts_member_bots() -> None:
    registry = site({"bots/builder.md": "---\nname: Builder\nextends: builder\n---\n"})
    builder = registry.get("builder")
    assert builder is not None and builder.surfaces == ("rooms", "members")
    assert builder.tools == ("create_bot", "remove_bot", "fetch", "card")
