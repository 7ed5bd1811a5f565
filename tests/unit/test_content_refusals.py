"""Every refusal of the compile (SPEC §3, issue 5): a broken file → the exact ``path:line: message``,
naming both sides where there are two."""

from __future__ import annotations

import pytest

from appservice.kinds import KINDS
from engine.content import CompileError, Unavailable, compile_sources

SERVER = "example.org"
SPEC = """\
openapi: 3.0.0
info: {title: Pets, version: '1'}
servers: [{url: 'https://pets.example.org/v1'}]
paths:
  /pets:
    get: {operationId: listPets, summary: List the pets}
  /pets/{id}:
    get: {operationId: showPet}
"""
KIT = {"bots/desk.md": "---\nname: Desk\nsurfaces: [desk]\n---\nConduct.\n"}
BUILTINS = ("built-ins: about_me, card, create_bot, current_room, fetch, hand_to_people, open_skill, raise_ticket, remove_bot, "
            "search_site")


def bot(front: str, body: str = "Be helpful.") -> str:
    return f"---\n{front}---\n{body}\n"


def skill(front: str = "description: When to open it.\n", body: str = "What it knows.") -> str:
    return f"---\n{front}---\n{body}\n"


def errors(sources: dict[str, str], referenced: dict[str, str | Unavailable] | None = None) -> list[str]:
    result = compile_sources(
        sources, kinds=KINDS, server_name=SERVER, kit=KIT, referenced={"tools/pets.yaml": SPEC} if referenced is None else referenced
    )
    assert isinstance(result, list), "it compiled"
    assert all(isinstance(error, CompileError) for error in result)
    return [str(error) for error in result]


def schedule(body: str) -> str:
    return bot("name: B\nhears:\n" + body)


REFUSALS = [
    # unknown key (top level, nested, inside a trigger)
    pytest.param(
        {"bots/b.md": schedule("  - schedule:\n      every: day\n      cron: x\n    in: '!r:example.org'\n    ask: x\n")},
        "bots/b.md:6: unknown key 'cron' in hears[0].schedule (allowed: every, on, at, zone, interval, until, except)",
        id="unknown-key-in-schedule",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - event: member.joined\n    ask: x\n    in: y\n")},
        "bots/b.md:6: unknown key 'in' in hears[0] (allowed: event, ask)",
        id="unknown-key-in-event",
    ),
    pytest.param(
        {"skills/s.md": skill("description: d\nbrings: [x]\n")},
        "skills/s.md:3: unknown key 'brings' (allowed: description, tools, for)",
        id="unknown-key-in-skill",
    ),
    # unknown trigger / event
    pytest.param(
        {"bots/b.md": bot("name: B\nhears: [reaction]\n")},
        "bots/b.md:3: hears[0]: unknown trigger 'reaction' (known: mention, schedule, event, support-message)",
        id="unknown-trigger",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - cron: '* * * * *'\n    ask: x\n")},
        "bots/b.md:4: hears[0]: a trigger names one of mention, schedule, event, support-message, not cron, ask",
        id="unknown-trigger-mapping",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nhears: [schedule]\n")},
        "bots/b.md:3: hears[0]: trigger 'schedule' needs its details: write it as a mapping, like"
        " '- schedule: …' with ask: (and in: for a schedule)",
        id="bare-schedule",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - event: signup\n    ask: welcome\n")},
        "bots/b.md:4: hears[0].event: unknown event 'signup' (Matrix events: member.joined, member.left,"
        " room.created, reaction; a site's own events are written site.<name>, like site.purchase.paid)",
        id="unknown-event",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - event: member.joined\n")},
        "bots/b.md:4: hears[0]: an event needs ask: (what it wakes up to do)",
        id="event-without-ask",
    ),
    # schedule without in: or ask:, and the recurrence grammar
    pytest.param(
        {"bots/b.md": schedule("  - mention\n  - schedule: {every: day}\n    ask: news\n")},
        "bots/b.md:5: hears[1]: a schedule needs in: (the room it speaks in) and ask: (what it wakes up to do);"
        " this one has no in:",
        id="schedule-without-in",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - schedule: {every: day}\n    in: '#general:example.org'\n")},
        "bots/b.md:4: hears[0]: a schedule needs in: (the room it speaks in) and ask: (what it wakes up to do);"
        " this one has no ask:",
        id="schedule-without-ask",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - schedule: {every: fortnight}\n    in: '!r:example.org'\n    ask: x\n")},
        "bots/b.md:4: hears[0].schedule.every: 'fortnight' is not how often (day, week, month, 'N minutes' or 'N hours')",
        id="schedule-every",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - schedule:\n      every: day\n      zone: Mars/Olympus\n    in: '!r:example.org'\n    ask: x\n")},
        "bots/b.md:6: hears[0].schedule.zone: 'Mars/Olympus' is not an IANA time zone (like Europe/Dublin or UTC)",
        id="schedule-zone",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - schedule:\n      every: week\n      on: [mon]\n    in: '!r:example.org'\n    ask: x\n")},
        "bots/b.md:6: hears[0].schedule.on: 'mon' is not a day of the week (monday, tuesday, wednesday, thursday,"
        " friday, saturday, sunday)",
        id="schedule-on",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - schedule: {every: day, at: 8}\n    in: '!r:example.org'\n    ask: x\n")},
        "bots/b.md:4: hears[0].schedule.at: 8 is not a time of day: write it in quotes, like '08:00'",
        id="schedule-at",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - schedule:\n      every: 15 minutes\n      at: '08:00'\n    in: '!r:example.org'\n    ask: x\n")},
        "bots/b.md:5: hears[0].schedule: at: a time of day goes with every: day, week or month, not '15 minutes'",
        id="schedule-at-with-minutes",
    ),
    pytest.param(
        {"bots/b.md": schedule("  - schedule: {every: day}\n    in: general\n    ask: x\n")},
        "bots/b.md:5: hears[0].in: 'general' is not a room: write its id '!id:server' or an alias '#name:server'",
        id="schedule-in-not-a-room",
    ),
    # voice:, offer:, answers: each need their surface; offer needs a per-person ceiling
    pytest.param(
        {"bots/b.md": bot("name: B\nsurfaces: [rooms]\nvoice: {voice: alloy}\n")},
        "bots/b.md:4: voice: says how the bot sounds, but it is not on the voice surface (surfaces: rooms)",
        id="voice-without-surface",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nsurfaces: [desk]\noffer: ask\n")},
        "bots/b.md:4: offer: ask needs limits.per: an offered bot answers people by itself, so a per-person ceiling"
        " must hold (windows: minute, hour, day, week, month)",
        id="offer-without-per",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\noffer: always\nlimits: {per: {day: 1}}\n")},
        "bots/b.md:3: offer: always offers the bot on the desk, but it is not on the desk (surfaces: rooms)",
        id="offer-without-desk",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nanswers: directly\n")},
        "bots/b.md:3: answers: is how the bot answers on the desk, but it is not on the desk (surfaces: rooms)",
        id="answers-without-desk",
    ),
    # unknown spend window
    pytest.param(
        {"bots/b.md": bot("name: B\nlimits:\n  per:\n    day: 2\n    fortnight: 5\n")},
        "bots/b.md:6: limits.per: unknown spend window 'fortnight' (windows: minute, hour, day, week, month)",
        id="unknown-spend-window",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nlimits:\n  per:\n    day: lots\n")},
        "bots/b.md:5: limits.per: day: is what one person may spend in a day, in USD (a number ≥ 0), not 'lots'",
        id="spend-window-not-money",
    ),
    # unknown audience class (a bot's, a skill's, a command's)
    pytest.param(
        {"skills/s.md": skill("description: d\nfor: staff\n")},
        "skills/s.md:3: for: unknown audience class 'staff' (known: anyone, authenticated, local, member, moderator,"
        " admin, customer, subscribed, user:@name:server, server:<name>, tier:<slug>, role:<name>, bought:<product>)",
        id="unknown-audience-in-skill",
    ),
    # skill without a description
    pytest.param(
        {"skills/s.md": skill("tools: []\n")},
        "skills/s.md:1: a skill needs a description: the one line a bot sees, saying when to open it"
        " (without one it would never be opened)",
        id="skill-without-description",
    ),
    pytest.param(
        {"skills/s.md": skill("description: |\n  one\n  two\n")},
        "skills/s.md:2: description: must be one line",
        id="skill-description-two-lines",
    ),
    # a skill or tool that does not exist
    pytest.param(
        {"bots/b.md": bot("name: B\nskills: [refunds]\n"), "skills/other.md": skill()},
        "bots/b.md:3: skills: 'refunds' is not a skill (skills: other)",
        id="bot-names-no-skill",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\ntools:\n  - search_site\n  - lookup\n")},
        f"bots/b.md:5: tools: 'lookup' is not a tool ({BUILTINS}; content/tools: none)",
        id="bot-names-no-tool",
    ),
    pytest.param(
        {
            "skills/s.md": skill("description: d\ntools: [issue_refund]\n"),
            "tools/pets.md": "---\nopenapi: tools/pets.yaml\noperations: [listPets]\n---\n",
        },
        f"skills/s.md:3: tools: 'issue_refund' is not a tool ({BUILTINS}; content/tools: pets)",
        id="skill-names-no-tool",
    ),
    # commands: surface, argument kind, target
    pytest.param(
        {"bots/b.md": bot("name: B\n"), "commands/c.md": "---\nbot: b\nsurfaces: [rooms, desk]\n---\nDo it.\n"},
        "commands/c.md:3: surfaces: !c is offered on desk, but its bot 'b' is not (bots/b.md surfaces: rooms)",
        id="command-on-a-surface-its-bot-is-not-on",
    ),
    pytest.param(
        {
            "bots/b.md": bot("name: B\n"),
            "commands/c.md": "---\nbot: b\nargs:\n  - {name: since, kind: date, label: Since}\n---\nSince {since}.\n",
        },
        "commands/c.md:4: args[0].kind: 'date' is a kind no control can draw (kinds: span, choice, person,"
        " boolean, number, text)",
        id="command-argument-kind",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\n"), "commands/c.md": "---\nbot: b\nargs:\n  - name: x\n    kind: choice\n    label: X\n---\nDo it\n"},
        "commands/c.md:5: args[0]: a choice needs choices: the options a person picks from",
        id="command-choice-without-choices",
    ),
    pytest.param(
        {
            "bots/b.md": bot("name: B\n"),
            "commands/c.md": "---\nbot: b\nargs:\n  - name: since\n    kind: span\n    label: Since\n    default: yesterday\n---\nDo it\n",
        },
        "commands/c.md:7: args[0]: default: a span is written like 2d, 48h or '1 week', not 'yesterday'",
        id="command-default-of-the-wrong-kind",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\n"), "commands/c.md": "---\nbot: scribe\n---\nDo it\n"},
        "commands/c.md:2: bot: 'scribe' is not a bot (content/bots: b)",
        id="command-bot-missing",
    ),
    pytest.param(
        {"commands/c.md": "---\nbot: desk\n---\nDo it\n"},
        "commands/c.md:2: bot: 'desk' is the kit's and off; turn it on with content/bots/desk.md (extends: desk)",
        id="command-for-a-kit-bot-that-is-off",
    ),
    pytest.param(
        {"commands/c.md": "---\ntool: lookup\n---\n"},
        f"commands/c.md:2: tool: 'lookup' is not a tool ({BUILTINS}; content/tools: none)",
        id="command-tool-missing",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\n"), "commands/c.md": "---\nbot: b\ntool: fetch\n---\nDo it\n"},
        "commands/c.md:3: a command either asks a bot (bot: <slug>) or runs a tool (tool: <name>), one of them",
        id="command-both-bot-and-tool",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\n"), "commands/c.md": "---\nbot: b\n---\nDo it\nsince {since}\n"},
        "commands/c.md:5: {since} is not an argument of !c (args: none)",
        id="command-placeholder-not-an-argument",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\n"), "commands/help.md": "---\nbot: b\n---\nDo it\n"},
        "commands/help.md:1: !help is the service's own command (its own: !bots, !cancel, !forget, !help, !memories)",
        id="command-takes-a-service-name",
    ),
    # OpenAPI tools: the spec must load and hold every allowed operation
    pytest.param(
        {"tools/pets.md": "---\nopenapi: tools/pets.yaml\noperations: [listPets]\n---\n"},
        "tools/pets.md:2: openapi: the spec tools/pets.yaml does not load: there is no such file in content",
        id="openapi-spec-missing",
    ),
    pytest.param(
        {"tools/pets.md": "---\nopenapi: tools/pets.yaml\noperations: [listPets]\n---\n"},
        "tools/pets.md:2: openapi: the spec tools/pets.yaml does not load: it is not an OpenAPI document"
        " (no 'openapi' or 'swagger' version)",
        id="openapi-spec-not-openapi",
    ),
    pytest.param(
        {"tools/pets.md": "---\nopenapi: tools/pets.yaml\noperations:\n  - listPets\n  - deletePet\n---\n"},
        "tools/pets.md:5: operations: 'deletePet' is not an operation of tools/pets.yaml (its operationIds:"
        " listPets, showPet)",
        id="openapi-operation-missing",
    ),
    pytest.param(
        {"tools/pets.md": "---\nopenapi: tools/pets.yaml\n---\n"},
        "tools/pets.md:2: operations: is required: the allow-list of operationIds from tools/pets.yaml this tool may call",
        id="openapi-without-operations",
    ),
    pytest.param(
        {"tools/w.md": "---\nopenapi: ../secret.yaml\noperations: [x]\n---\n"},
        "tools/w.md:2: openapi: '../secret.yaml' is neither an http(s) url nor a path inside content/ (like tools/api.yaml)",
        id="openapi-outside-content",
    ),
    pytest.param(
        {"tools/w.md": "---\nmodule: tools/weather.js\n---\n"},
        "tools/w.md:2: module: 'tools/weather.js' is not a Python file inside content/ (like tools/weather.py)",
        id="module-not-python",
    ),
    pytest.param(
        {"tools/w.md": "---\nmodule: tools/weather.py\n---\n"},
        "tools/w.md:2: module: tools/weather.py does not load: it was not read",
        id="module-missing",
    ),
    pytest.param(
        {"tools/w.md": "---\ndescription: x\n---\n"},
        "tools/w.md:1: a tool names an OpenAPI spec (openapi: + operations:) or a module: (a .py file)",
        id="tool-of-no-kind",
    ),
    # extends: a bot that does not exist, itself, or a circle
    pytest.param(
        {"bots/b.md": bot("name: B\nextends: support\n"), "bots/a.md": bot("name: A\n")},
        "bots/b.md:3: extends: 'support' is not a bot (content/bots: a, b; the kit's: desk)",
        id="extends-missing",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nextends: b\n")},
        "bots/b.md:3: extends: a bot cannot extend itself ('b'), and the kit has no 'b'",
        id="extends-itself",
    ),
    pytest.param(
        {"bots/a.md": bot("name: A\nextends: b\n"), "bots/b.md": bot("name: B\nextends: c\n"), "bots/c.md": bot("name: C\nextends: a\n")},
        "bots/c.md:3: extends: a circle (bots/a.md → bots/b.md → bots/c.md → bots/a.md)",
        id="extends-circle",
    ),
    # the other bot keys
    pytest.param(
        {"bots/b.md": bot("name: B\navatar: https://x/y.png\n")},
        "bots/b.md:3: avatar: 'https://x/y.png' is neither an mxc:// uri nor an image file under content/ (e.g. "
        "avatars/helper.png: .png, .jpg, .gif or .webp)",
        id="avatar-not-mxc",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nendings:\n  out_of_cash: x\n")},
        "bots/b.md:4: endings: unknown ending 'out_of_cash' (endings: cancelled, out_of_money, out_of_steps,"
        " out_of_time, nothing_to_add, failed)",
        id="unknown-ending",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nskills: some\n")},
        "bots/b.md:3: skills: a list of skill names, or all (every published skill), not 'some'",
        id="skills-neither-list-nor-all",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nmemory: forever\n")},
        "bots/b.md:3: memory: unknown memory 'forever' (memories: none, thread, person, person+recall)",
        id="unknown-memory",
    ),
    # A built-in's own file sets who may be offered it and where, nothing else (issue 12 §3).
    pytest.param(
        {"tools/fetch.md": "---\nfor: member\nopenapi: tools/pets.yaml\noperations: [listPets]\n---\n"},
        "tools/fetch.md:3: 'fetch' is a built-in tool: a file of that name sets only its for:, needs:, personal:"
        " (openapi: is not one of them; an OpenAPI or code tool takes a name of its own)",
        id="builtin-file-as-openapi",
    ),
    pytest.param(
        {"tools/search_site.md": "---\ndescription: Search harder.\n---\n"},
        "tools/search_site.md:2: 'search_site' is a built-in tool: a file of that name sets only its for:, needs:,"
        " personal: (description: is not one of them; an OpenAPI or code tool takes a name of its own)",
        id="builtin-file-with-words",
    ),
    pytest.param(
        {"tools/about_me.md": "---\nfor: member\npersonal: false\n---\n"},
        "tools/about_me.md:3: personal: about_me reads the person's own data, so it is always personal"
        " (leave personal: out)",
        id="about-me-is-always-personal",
    ),
    pytest.param(
        {"tools/open_skill.md": "---\nfor: member\n---\n"},
        "tools/open_skill.md:1: open_skill comes with a bot's skills and is offered wherever they are: give a skill"
        " its own for: instead of a file for open_skill",
        id="open-skill-takes-no-file",
    ),
    # The subject of an OpenAPI tool (issue 12 §7).
    pytest.param(
        {"tools/pets.md": "---\nopenapi: tools/pets.yaml\noperations: [listPets, showPet]\nsubject: owner\n---\n"},
        "tools/pets.md:4: subject: 'owner' is not a parameter of the allowed operations, so nothing would be filled"
        " with the person's account (their parameters — listPets: none; showPet: none)",
        id="subject-not-a-parameter",
    ),
    pytest.param(
        {"tools/w.md": "---\nmodule: tools/w.py\nsubject: user\n---\n"},
        "tools/w.md:3: subject: names the parameter of an OpenAPI operation that is filled with the person's"
        " account; a code tool is given the run, never a person",
        id="subject-on-a-code-tool",
    ),
    pytest.param(
        {"tools/pets.md": "---\nopenapi: tools/pets.yaml\noperations: [showPet]\nsubject: id\npersonal: false\n---\n"},
        "tools/pets.md:5: personal: false, but subject: fills in the person's account: a tool that reads it is"
        " personal (leave personal: out)",
        id="subject-but-not-personal",
    ),
    pytest.param(
        {"bots/b.md": bot("name: B\nsurfaces: [voice]\nvoice: {voices: [a]}\n")},
        "bots/b.md:4: voice: missing required key 'voice'",
        id="voice-without-a-voice",
    ),
]


@pytest.mark.parametrize(("sources", "expected"), REFUSALS)
def test_refusal(sources: dict[str, str], expected: str, request: pytest.FixtureRequest) -> None:
    referenced: dict[str, str | Unavailable] | None = None
    if "openapi-spec-missing" in request.node.name:
        referenced = {"tools/pets.yaml": Unavailable("there is no such file in content")}
    elif "openapi-spec-not-openapi" in request.node.name:
        referenced = {"tools/pets.yaml": "title: not a spec\n"}
    assert errors(sources, referenced) == [expected]


def test_an_encrypted_room_cannot_be_scheduled_into() -> None:
    text = schedule("  - schedule: {every: day}\n    in: '!sealed:example.org'\n    ask: x\n")
    result = compile_sources({"bots/b.md": text}, kinds=KINDS, server_name=SERVER, sealed_places={"!sealed:example.org"})
    assert [str(error) for error in result] == [  # type: ignore[union-attr]
        "bots/b.md:5: hears[0].in: !sealed:example.org is encrypted; a bot cannot read it, so it cannot speak there"
    ]


def test_site_events_a_deployment_declares() -> None:
    text = schedule("  - event: site.purchase.paid\n    ask: x\n")
    assert not isinstance(compile_sources({"bots/b.md": text}, kinds=KINDS, server_name=SERVER), list)
    refused = compile_sources({"bots/b.md": text}, kinds=KINDS, server_name=SERVER, site_events={"site.support.escalated"})
    assert [str(error) for error in refused] == [  # type: ignore[union-attr]
        "bots/b.md:4: hears[0].event: 'site.purchase.paid' is not a site event this deployment posts"
        " (site events: site.support.escalated)"
    ]


def test_zones_can_be_handed_in() -> None:
    text = schedule("  - schedule: {every: day, zone: Europe/Dublin}\n    in: '!r:example.org'\n    ask: x\n")
    assert not isinstance(compile_sources({"bots/b.md": text}, kinds=KINDS, server_name=SERVER), list)
    refused = compile_sources({"bots/b.md": text}, kinds=KINDS, server_name=SERVER, zones={"UTC"})
    assert isinstance(refused, list) and "'Europe/Dublin' is not an IANA time zone" in str(refused[0])


def test_every_error_of_every_kind_at_once_in_order() -> None:
    found = errors(
        {
            "bots/b.md": bot("name: B\ntools: [nope]\nskills: [gone]\n"),
            "skills/s.md": skill("for: vip\n"),
            "commands/c.md": "---\nbot: nobody\n---\nx\n",
        }
    )
    assert [line.split(": ")[0] for line in found] == ["bots/b.md:3", "bots/b.md:4", "commands/c.md:2", "skills/s.md:1", "skills/s.md:2"]


def test_a_file_with_errors_is_not_also_reported_as_missing_where_it_is_named() -> None:
    found = errors(
        {
            "bots/scribe.md": bot("name: Scribe\ncolour: red\n"),
            "bots/child.md": bot("name: Child\nextends: scribe\n"),
            "skills/s.md": skill("description: d\nfor: vip\n"),
            "tools/t.md": "---\nmodule: tools/t.js\n---\n",
            "bots/user.md": bot("name: U\nskills: [s]\ntools: [t]\n"),
            "commands/c.md": "---\nbot: scribe\n---\nDo it.\n",
        }
    )
    assert [line.split(": ")[0] for line in found] == ["bots/scribe.md:3", "skills/s.md:3", "tools/t.md:2"]


@pytest.mark.parametrize(
    ("servers", "said"),
    [
        ("", "names no server"),
        ("servers: [{url: /api}]\n", "names a server the tool cannot call ('/api'"),
        ("servers: [{url: 'https://{region}.example.org'}]\n", "names a server the tool cannot call"),
    ],
    ids=["none", "relative", "unfilled-variable"],
)
def test_an_openapi_tool_whose_spec_names_no_callable_server_is_refused(servers: str, said: str) -> None:
    from engine.content import CompileError, compile_sources

    spec = f"openapi: 3.0.0\ninfo: {{title: P, version: '1'}}\n{servers}paths:\n  /p:\n    get: {{operationId: listP}}\n"
    result = compile_sources({"tools/p.md": "---\nopenapi: tools/p.yaml\noperations: [listP]\n---\n"},
                             kinds=KINDS, server_name="example.org", referenced={"tools/p.yaml": spec})
    assert isinstance(result, list) and all(isinstance(e, CompileError) for e in result)
    assert len(result) == 1 and said in str(result[0]) and str(result[0]).startswith("tools/p.md:2: openapi:")


@pytest.mark.parametrize("event", ["room.created", "reaction", "member.left"])
def test_every_matrix_event_a_bot_may_hear_is_raised_so_it_compiles(event: str) -> None:
    # Refused as "not raised yet" until the Matrix surface raised them (tests/matrix/test_events_live.py).
    result = compile_sources({"bots/b.md": schedule(f"  - event: {event}\n    ask: say hello\n")}, kinds=KINDS, server_name=SERVER)
    assert not isinstance(result, list), result
