"""What a run may use (SPEC §3): the offered set, worked out from the run, its steps, the content and
the asker. Withheld is absent — from the tools and from the prompt — never refused."""

from __future__ import annotations

import pytest

from appservice.kinds import KINDS
from engine.content import Registry, compile_sources
from engine.content.audience import AudienceFacts
from engine.content.parts import BUILTIN_TOOLS
from engine.core.messages import Step, ToolCall, ToolCallStep, ToolResultStep
from engine.tools.base import BUILTIN_SPECS, RunRef, offered, opened_skills

SERVER = "example.org"
SPEC = """\
openapi: 3.0.0
info: {title: Shop, version: '1'}
servers: [{url: 'https://shop.example.org/api'}]
paths:
  /orders/{id}:
    get:
      operationId: getOrder
      summary: One order by its number
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
  /refunds:
    post:
      operationId: issueRefund
      summary: Give money back for an order
"""

SOURCES = {
    "bots/clerk.md": "---\nname: Clerk\nfor: anyone\ntools: [search_site, about_me, shop, staffonly]\n"
                     "skills: all\n---\nBe helpful.\n",
    "bots/plain.md": "---\nname: Plain\n---\nBe brief.\n",
    "tools/shop.md": "---\nopenapi: tools/shop.yaml\noperations: [getOrder]\n---\n",
    "tools/staffonly.md": "---\nopenapi: tools/shop.yaml\noperations: [getOrder]\nfor: moderator\n---\n",
    "tools/refunds.md": "---\nopenapi: tools/shop.yaml\noperations: [issueRefund]\n---\n",
    "tools/deskonly.md": "---\nopenapi: tools/shop.yaml\noperations: [getOrder]\nneeds: desk\n---\n",
    "skills/refunds-and-returns.md": "---\ndescription: Open this before saying anything about money going back.\n"
                                     "tools: [refunds]\n---\nNever promise a refund; raise a ticket.\n",
    "skills/for-mods.md": "---\ndescription: How moderators close a thread.\nfor: moderator\n---\nClose it.\n",
}


def registry(extra: dict[str, str] | None = None) -> Registry:
    result = compile_sources({**SOURCES, **(extra or {})}, kinds=KINDS, server_name=SERVER, referenced={"tools/shop.yaml": SPEC})
    assert isinstance(result, Registry), "\n".join(map(str, result))
    return result


def member(power: int = 0) -> AudienceFacts:
    """A member of the room; at 100 (by the room's power levels, as its surface reads them) a moderator."""
    return AudienceFacts(user_id="@ann:example.org", local_server=SERVER, is_member=True,
                         is_moderator=power >= 50, is_admin=power >= 100)


def alone() -> AudienceFacts:
    """A member of a room nobody else reads (a DM with the bot), as its surface says."""
    return AudienceFacts(user_id="@ann:example.org", local_server=SERVER, is_member=True, private=True)


RUN = RunRef(id=1, bot="clerk", surface="rooms", place="!r:example.org")
OPENED = [ToolCallStep(ToolCall("c1", "open_skill", {"name": "refunds-and-returns"})),
          ToolResultStep("c1", "Never promise a refund; raise a ticket.")]
FAILED_OPEN = [ToolCallStep(ToolCall("c1", "open_skill", {"name": "refunds-and-returns"})),
               ToolResultStep("c1", "There is no skill named 'x'.", is_error=True)]


def names(steps: list[Step], facts: AudienceFacts | None, run: RunRef = RUN, extra: dict[str, str] | None = None
          ) -> tuple[set[str], set[str]]:
    offer = offered(run, steps, registry(extra), facts)
    return offer.names, {s.name for s in offer.skills}


@pytest.mark.parametrize(
    ("who", "steps", "tools", "skills"),
    [
        # In a room others read, about_me (personal) is withheld from everyone (SPEC §8).
        ("member", [], {"open_skill", "search_site", "shop_getOrder"}, {"refunds-and-returns"}),
        ("moderator", [], {"open_skill", "search_site", "shop_getOrder", "staffonly_getOrder"},
         {"refunds-and-returns", "for-mods"}),
        # Where the asker alone reads the answer (a DM with the bot), it is offered.
        ("alone", [], {"open_skill", "search_site", "about_me", "shop_getOrder"}, {"refunds-and-returns"}),
        # A skill's own tools come only once it was opened — read off the steps.
        ("member", OPENED, {"open_skill", "search_site", "shop_getOrder", "refunds_issueRefund"},
         {"refunds-and-returns"}),
        # An open_skill that failed opened nothing.
        ("member", FAILED_OPEN, {"open_skill", "search_site", "shop_getOrder"}, {"refunds-and-returns"}),
        # Nobody asked (a schedule, an event): anything with an audience, and anything personal, is withheld.
        ("nobody", [], {"open_skill", "search_site", "shop_getOrder"}, {"refunds-and-returns"}),
    ],
    ids=["member", "moderator", "alone", "skill_opened", "failed_open", "no_asker"],
)
def test_offered_table(who: str, steps: list[Step], tools: set[str], skills: set[str]) -> None:
    facts = {"member": member(), "moderator": member(100), "alone": alone(), "nobody": None}[who]
    assert names(steps, facts) == (tools, skills)


def test_a_skill_withheld_keeps_its_tools_withheld_even_if_the_model_opens_it() -> None:
    opened_mods = [ToolCallStep(ToolCall("c1", "open_skill", {"name": "for-mods"})), ToolResultStep("c1", "Close it.")]
    extra = {"skills/for-mods.md": "---\ndescription: How moderators close a thread.\nfor: moderator\n"
                                   "tools: [refunds]\n---\nClose it.\n"}
    tools, skills = names(opened_mods, member(), extra=extra)
    assert "for-mods" not in skills
    assert "refunds_issueRefund" not in tools


def test_a_tool_that_needs_the_desk_is_offered_only_there() -> None:
    extra = {"bots/clerk.md": "---\nname: Clerk\nsurfaces: [rooms, desk]\nlimits: {per: {day: 1}}\n"
                              "tools: [deskonly]\n---\nBe helpful.\n"}
    on_rooms, _ = names([], member(), extra=extra)
    on_desk, _ = names([], member(), run=RunRef(1, "clerk", "desk"), extra=extra)
    assert "deskonly_getOrder" not in on_rooms
    assert "deskonly_getOrder" in on_desk


def test_current_room_is_offered_on_the_door_only() -> None:
    # Where a voice session is, only a voice session knows: a room's run is offered no current_room.
    extra = {"bots/caller.md": "---\nname: Caller\nsurfaces: [rooms, voice]\ntools: [current_room, search_site]\n"
                               "---\nBe brief.\n"}
    in_room, _ = names([], member(), run=RunRef(1, "caller", "rooms"), extra=extra)
    by_voice, _ = names([], member(), run=RunRef(1, "caller", "voice"), extra=extra)
    assert "current_room" not in in_room and "search_site" in in_room
    assert {"current_room", "search_site"} <= by_voice


def test_a_bot_without_skills_or_tools_is_offered_nothing() -> None:
    offer = offered(RunRef(1, "plain", "rooms"), [], registry(), member())
    assert offer.tools == () and offer.skills == ()


def test_an_unknown_bot_is_offered_nothing() -> None:
    assert offered(RunRef(1, "ghost", "rooms"), [], registry(), member()).names == frozenset()


def test_a_tool_the_model_names_that_was_not_offered_is_not_in_the_set() -> None:
    """The worker answers a name outside ``names`` exactly as an unknown tool (tests/db/test_tools.py)."""
    offer = offered(RUN, [], registry(), member())
    assert "staffonly_getOrder" not in offer.names
    assert "refunds_issueRefund" not in offer.names
    assert "no_such_tool" not in offer.names


def test_content_tools_map_back_to_their_file_and_operation() -> None:
    offer = offered(RUN, OPENED, registry(), member())
    assert offer.targets["shop_getOrder"] == ("shop", "getOrder")
    assert offer.targets["refunds_issueRefund"] == ("refunds", "issueRefund")
    assert "search_site" not in offer.targets  # built-ins run by name


def test_harness_tools_are_offered_to_every_run() -> None:
    from engine.core.messages import ToolSpec

    offer = offered(RunRef(1, "plain", "rooms"), [], registry(), None, harness={"noop": ToolSpec("noop")})
    assert offer.names == {"noop"}


def test_twenty_skills_are_twenty_lines_not_twenty_bodies() -> None:
    body = "A long body that must stay behind open_skill. " * 40
    extra = {f"skills/skill-{n:02d}.md": f"---\ndescription: Open this for question kind {n}.\n---\n{body}\n"
             for n in range(20)}
    extra["bots/clerk.md"] = "---\nname: Clerk\nskills: [" + ", ".join(f"skill-{n:02d}" for n in range(20)) + "]\n---\nHi.\n"
    offer = offered(RUN, [], registry(extra), member())
    section = offer.skills_section("Your skills:")
    assert len(offer.skills) == 20
    assert section.count("\n") == 20  # the header and one line per skill
    assert "A long body" not in section
    assert all(f"skill-{n:02d}: Open this for question kind {n}." in section for n in range(20))


def test_opened_skills_are_read_off_the_steps_in_order() -> None:
    steps: list[Step] = [
        *OPENED,
        ToolCallStep(ToolCall("c2", "open_skill", {"name": "for-mods"})), ToolResultStep("c2", "Close it."),
        ToolCallStep(ToolCall("c3", "open_skill", {"name": "refunds-and-returns"})), ToolResultStep("c3", "again"),
    ]
    assert opened_skills(steps) == ("refunds-and-returns", "for-mods")


def test_the_builtins_are_exactly_ten_each_saying_when_to_reach_for_it() -> None:
    # Issue 14 added the member bots' three: card, create_bot and remove_bot; issue 31 the desk's hand_to_people.
    # Three are a surface's own, registered with it (the door's current_room, the member bots' card, the desk's
    # hand_to_people), offered only there.
    assert set(BUILTIN_SPECS) == set(BUILTIN_TOOLS)
    assert set(BUILTIN_TOOLS) | set(KINDS.tools) == {"open_skill", "search_site", "about_me", "raise_ticket", "fetch",
                                                      "current_room", "card", "create_bot", "remove_bot",
                                                      "hand_to_people"}
    assert {name: needs for name, (_, needs) in KINDS.tools.items()} == {"current_room": "voice", "card": "members",
                                                                         "hand_to_people": "desk"}
    for name, spec in {**BUILTIN_SPECS, **{name: spec for name, (spec, _) in KINDS.tools.items()}}.items():
        assert spec.name == name
        assert len(spec.description) > 60, f"{name}: a tool's description is prompt; say when to use it"
        assert spec.parameters["type"] == "object"
    # Personal tools take no person: there is nowhere to put one.
    for personal in ("about_me", "raise_ticket", "create_bot", "remove_bot"):
        properties = BUILTIN_SPECS[personal].parameters["properties"]
        assert not {"user", "user_id", "person", "who", "contact", "email"} & set(properties)


# --- said only where the subject alone reads it (SPEC §8; issue 12 §3) ---------------------------------------

PEOPLE_SPEC = SPEC + """\
  /people/{user}/orders:
    get:
      operationId: ordersOf
      summary: The orders a person has placed
      parameters:
        - {name: user, in: path, required: true, schema: {type: string}}
        - {name: status, in: query, schema: {type: string}}
"""
ELSEWHERE = "Others read along here; offer a direct message."
PERSONAL = {
    "bots/clerk.md": "---\nname: Clerk\ntools: [search_site, about_me, myorders, mynotes, shop]\n---\nBe helpful.\n",
    "tools/myorders.md": "---\nopenapi: tools/shop.yaml\noperations: [ordersOf]\nsubject: user\n---\n",
    "tools/mynotes.md": "---\nopenapi: tools/shop.yaml\noperations: [getOrder]\npersonal: true\n---\n",
    "strings.md": f"# Words\n\n## bots\n\n### tools\n\n- private_elsewhere: {ELSEWHERE}\n",
}


def personal_registry(extra: dict[str, str] | None = None) -> Registry:
    result = compile_sources({**SOURCES, **PERSONAL, **(extra or {})}, kinds=KINDS, server_name=SERVER,
                             referenced={"tools/shop.yaml": PEOPLE_SPEC})
    assert isinstance(result, Registry), "\n".join(map(str, result))
    return result


MINE = {"about_me", "myorders_ordersOf", "mynotes_getOrder"}


@pytest.mark.parametrize(
    ("who", "offered_mine"),
    [("alone", True), ("member", False), ("moderator", False), ("nobody", False)],
)
def test_a_personal_tool_is_offered_only_where_its_person_alone_reads_the_answer(who: str, offered_mine: bool) -> None:
    """about_me, a tool marked personal: and one filling a subject: — all three, together."""
    facts = {"member": member(), "moderator": member(100), "alone": alone(), "nobody": None}[who]
    offer = offered(RUN, [], personal_registry(), facts)
    assert (MINE <= offer.names) is offered_mine
    assert not (MINE & offer.names) or offered_mine
    assert {"search_site", "shop_getOrder"} <= offer.names  # nothing else changes


def test_withheld_for_privacy_the_bot_is_told_it_may_offer_a_direct_message() -> None:
    registry = personal_registry()
    shared = offered(RUN, [], registry, member())
    assert ELSEWHERE in shared.skills_section("Your skills:")
    assert ELSEWHERE not in offered(RUN, [], registry, alone()).skills_section("Your skills:")
    # Nobody asked (a schedule, an event): nobody to offer a direct message to.
    assert offered(RUN, [], registry, None).skills_section("Your skills:") == ""
    # A bot with nothing personal is told nothing.
    plain = offered(RunRef(1, "plain", "rooms"), [], registry, member())
    assert plain.skills_section("Your skills:") == ""


def test_the_subject_parameter_is_not_in_the_schema_the_model_sees() -> None:
    offer = offered(RUN, [], personal_registry(), alone())
    spec = next(s for s in offer.tools if s.name == "myorders_ordersOf")
    assert set(spec.parameters["properties"]) == {"status"}
    assert "required" not in spec.parameters  # `user` was the only required one
    assert spec.parameters["additionalProperties"] is False
    # The compiled operation still knows where the subject goes.
    op = personal_registry().tools["myorders"].allowed[0]
    assert [(p.name, p.where, p.subject) for p in op.params] == [("user", "path", True), ("status", "query", False)]


def test_a_personal_tool_a_skill_brings_is_withheld_in_a_shared_room_too() -> None:
    extra = {"skills/account.md": "---\ndescription: Open this about the person's account.\ntools: [about_me]\n---\nX\n",
             "bots/clerk.md": "---\nname: Clerk\nskills: [account]\n---\nBe helpful.\n"}
    opened = [ToolCallStep(ToolCall("c1", "open_skill", {"name": "account"})), ToolResultStep("c1", "X")]
    assert "about_me" not in offered(RUN, opened, personal_registry(extra), member()).names
    assert "about_me" in offered(RUN, opened, personal_registry(extra), alone()).names


# --- built-ins honour for: and needs: (issue 12 §3) ----------------------------------------------------------

BUILTIN_FILES = {
    "bots/clerk.md": "---\nname: Clerk\nsurfaces: [rooms, desk]\nlimits: {per: {day: 1}}\n"
                     "tools: [fetch, about_me, raise_ticket, search_site]\n---\nBe helpful.\n",
    "tools/fetch.md": "---\nfor: moderator\n---\nOnly moderators may have the bot read pages.\n",
    "tools/about_me.md": "---\nfor: customer\n---\n",
    "tools/raise_ticket.md": "---\nneeds: desk\n---\n",
}


def test_a_builtin_with_a_file_honours_its_for_and_needs() -> None:
    registry = personal_registry(BUILTIN_FILES)
    assert registry.tools["fetch"].kind == "builtin"
    assert offered(RUN, [], registry, member()).names == {"search_site"}
    assert offered(RUN, [], registry, member(100)).names == {"search_site", "fetch"}
    # about_me: for: customer, and personal — a customer in private only.
    customer_alone = AudienceFacts(user_id="@ann:example.org", local_server=SERVER, is_member=True, private=True,
                                   site_classes=frozenset({"customer"}))
    assert "about_me" not in offered(RUN, [], registry, alone()).names
    assert "about_me" in offered(RUN, [], registry, customer_alone).names
    # raise_ticket needs the desk.
    assert "raise_ticket" in offered(RunRef(1, "clerk", "desk"), [], registry, customer_alone).names
    assert "raise_ticket" not in offered(RUN, [], registry, customer_alone).names


def test_a_builtin_without_a_file_is_offered_as_before() -> None:
    offer = offered(RUN, [], personal_registry({"bots/clerk.md": BUILTIN_FILES["bots/clerk.md"]}), member())
    assert offer.names == {"fetch", "raise_ticket", "search_site"}  # about_me is personal: not in a shared room


def test_a_run_capped_by_its_standing_note_is_offered_only_those_tools_and_no_skills() -> None:
    # A member bot's edition runs as the builder: it is offered its charter's tools, never all the builder file's.
    extra = {"bots/host.md": "---\nname: Host\nsurfaces: [rooms]\ntools: [search_site, fetch, raise_ticket]\n"
                             "skills: all\n---\nBe brief.\n"}
    whole = offered(RunRef(1, "host", "rooms"), [], registry(extra), member())
    assert {"search_site", "fetch", "raise_ticket"} <= whole.names and whole.skills
    capped = offered(RunRef(1, "host", "rooms"), [], registry(extra), member(), only=frozenset({"fetch", "card"}))
    assert capped.names == frozenset({"fetch"}) and capped.skills == ()
