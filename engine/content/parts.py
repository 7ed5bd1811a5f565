"""What a bot knows, does and is asked through: skills, tools and commands (SPEC §3, §5).

``content/skills/<name>.md`` — a one-line description (all a bot sees until it opens the skill),
optional ``tools`` and ``for:``; the body is the skill. ``content/tools/<name>.md`` — an OpenAPI spec
and an allow-list of its operations, or a site ``module:``. ``content/commands/<name>.md`` — a ``!name``
that asks a bot (the body is its prompt template) or runs a tool, with typed arguments.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, PlainValidator, StrictBool, StrictStr, model_validator

from engine.content.base import AudienceField, Line, Name, Names, Refusal, Strict, unique
from engine.content.kinds import Kinds

# The tools the engine itself provides; a bot names them without a file. (The runtime is elsewhere;
# a test asserts this exact set, so another is a decision somebody makes on purpose.) A surface adds its
# own, offered only on it (``engine.content.kinds``).
BUILTIN_TOOLS = ("about_me", "create_bot", "fetch", "open_skill", "raise_ticket", "remove_bot", "search_site")
# The built-ins that read a person's own data: offered only where that person alone reads the answer.
# (raise_ticket writes for the person and answers only with the ticket's number: it reads nothing of theirs.)
# create_bot and remove_bot make and unmake the person's own member bots: offered only in a DM with them (or
# their bot's own room), never where anybody else could ask for one in their name.
PERSONAL_BUILTINS = ("about_me", "create_bot", "remove_bot")
# What a built-in's own file (``content/tools/<built-in>.md``) may set: who it is for and where.
BUILTIN_KEYS = ("for", "needs", "personal")
# The service's own commands: a content command may not take their names.
RESERVED_COMMANDS = ("bots", "cancel", "forget", "help", "memories")
ARG_KINDS = ("span", "choice", "person", "boolean", "number", "text")

_URL = re.compile(r"https?://[^\s/]+(?:/\S*)?")
_ARG_NAME = re.compile(r"[a-z_][a-z0-9_]*")
# Longest unit first, and a whole word: "1 week" is a week, not a "w" followed by "eek".
_SPAN_PART = re.compile(r"\s*([0-9]+)\s*(minutes?|mins?|m|hours?|h|days?|d|weeks?|w)(?![a-z])\s*")
_SPAN_UNIT = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_USER_ID = re.compile(r"@[^\s:]+:\S+")
# A placeholder in a command's prompt: {since}. Other braces are left as they are.
PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


# Longer than any conversation a room keeps, and far from timedelta's own limit.
MAX_SPAN = dt.timedelta(days=3660)


def parse_span(text: str) -> dt.timedelta | None:
    """``2d``, ``48h``, ``1 week``, ``1d 12h`` → a timedelta; None if it is not a span."""
    position, total = 0, dt.timedelta()
    text = text.strip()
    if not text:
        return None
    while position < len(text):
        match = _SPAN_PART.match(text, position)
        if match is None or match.end() == position or len(match.group(1)) > 6:
            return None
        total += dt.timedelta(**{_SPAN_UNIT[match.group(2)[0]]: int(match.group(1))})
        if total > MAX_SPAN:
            return None
        position = match.end()
    return total if total > dt.timedelta() else None


def _reference(value: str) -> str:
    """A file under content/ (relative, inside it) or an http(s) url."""
    value = value.strip()
    if _URL.fullmatch(value):
        return value
    parts = value.split("/")
    if not value or value.startswith("/") or "\\" in value or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{value!r} is neither an http(s) url nor a path inside content/ (like tools/api.yaml)")
    return value


def _module(value: str) -> str:
    value = _reference(value)
    if _URL.fullmatch(value) or not value.endswith(".py"):
        raise ValueError(f"{value!r} is not a Python file inside content/ (like tools/weather.py)")
    return value


class SkillFile(Strict):
    """The front matter of ``content/skills/<name>.md``."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)
    missing: ClassVar[dict[str, str]] = {
        "description": "a skill needs a description: the one line a bot sees, saying when to open it"
        " (without one it would never be opened)",
    }

    description: Line
    tools: Names = ()
    audience: AudienceField | None = Field(default=None, alias="for")


class Skill(SkillFile):
    name: str
    text: str
    source_path: str


class ToolFile(Strict):
    """The front matter of ``content/tools/<name>.md``: an OpenAPI spec and its allowed operations,
    or a site's own Python module — or, in a file named after a built-in, that built-in's ``for:``,
    ``needs:`` and ``personal:`` (which kind a file is needs its name: ``engine.content.link_tools``).

    ``personal``: the tool reads the person's own data, so it is offered only where the person the run
    is about is the only human who reads the answer. ``network``: a code tool's process may reach the
    network (``engine.sandbox.jail``); without it, it has none. ``subject``: the parameter of the allowed
    operations that names the person (``user_id``): filled from the run's subject, never shown to or
    taken from the model — which makes the tool personal."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)

    description: Line | None = None
    openapi: Annotated[StrictStr, AfterValidator(_reference)] | None = None
    operations: Annotated[tuple[StrictStr, ...], AfterValidator(unique)] = ()
    module: Annotated[StrictStr, AfterValidator(_module)] | None = None
    audience: AudienceField | None = Field(default=None, alias="for")
    needs: StrictStr | None = None  # one of the surfaces that let a tool need them: ``tool_file(kinds)``
    personal: StrictBool | None = None  # None: not said (a subject or a personal built-in makes it personal)
    subject: Line | None = None
    # A code tool's process gets a network of its own (never this machine's loopback); without it, none.
    network: StrictBool = False

    @model_validator(mode="after")
    def _one_kind(self) -> ToolFile:
        if self.subject is not None and self.openapi is None:
            raise Refusal(
                "subject: names the parameter of an OpenAPI operation that is filled with the person's account;"
                " a code tool is given the run, never a person", "subject",
            )
        if self.subject is not None and self.personal is False:
            raise Refusal(
                "personal: false, but subject: fills in the person's account: a tool that reads it is personal"
                " (leave personal: out)", "personal",
            )
        if self.openapi is not None and self.module is not None:
            raise Refusal("a tool is an OpenAPI spec or a module, not both", "module")
        if self.openapi is not None and not self.operations:
            raise Refusal(
                f"operations: is required: the allow-list of operationIds from {self.openapi} this tool may call",
                "openapi",
            )
        if self.module is not None and self.operations:
            raise Refusal("operations: belong to an OpenAPI tool; a module says what it does itself", "operations")
        if self.network and self.module is None:
            raise Refusal("network: says a code tool's process may reach the network; only a module: has one",
                          "network")
        return self


# Where an argument of an OpenAPI operation goes: a path, query or header parameter, one field of a
# JSON object body, or the whole JSON body.
Where = Literal["path", "query", "header", "field", "body"]


def _no_arguments() -> dict[str, Any]:
    return {"type": "object", "properties": {}, "additionalProperties": False}


class Param(Strict):
    """One argument of an OpenAPI operation: the model's name for it, the API's, and where it goes.
    ``subject``: the tool file names it as the person (``subject:``): the run's subject fills it, and the
    model is never offered it."""

    name: str
    key: str
    where: Where
    required: bool = False
    subject: bool = False


class Operation(Strict):
    """One allowed operation of an OpenAPI tool, as its spec declares it. ``parameters`` is the JSON
    Schema object a model is offered (read it, never change it); ``params`` says where each goes."""

    operation_id: str
    method: str
    path: str
    summary: str | None = None
    parameters: dict[str, Any] = Field(default_factory=_no_arguments)
    params: tuple[Param, ...] = ()


class Tool(ToolFile):
    """A compiled tool. ``notes`` (its file's body) are for people: never sent to a model, whose
    words are ``description`` and each operation's summary (a code tool without a description: its
    ``run``'s docstring, ``doc``). What a model is offered is ``engine.tools.schemas``. A ``builtin`` is a
    built-in's own file: the engine's tool, with the site's ``for:``, ``needs:`` and ``personal:``."""

    name: str
    kind: Literal["openapi", "module", "builtin"]
    base_url: str | None = None
    allowed: tuple[Operation, ...] = ()
    # A code tool's arguments, as its module's PARAMETERS declares them (JSON Schema; read, never change),
    # and its run function's docstring (a model's words when the file has no description).
    parameters: dict[str, Any] = Field(default_factory=_no_arguments)
    doc: str | None = None
    notes: str = ""
    source_path: str

    @property
    def is_personal(self) -> bool:
        """It reads a person's own data: marked ``personal:``, filling a ``subject:``, or a personal built-in."""
        return bool(self.personal) or self.subject is not None or (
            self.kind == "builtin" and self.name in PERSONAL_BUILTINS)


def _kind(value: object) -> str:
    if value not in ARG_KINDS:
        raise ValueError(f"{value!r} is a kind no control can draw (kinds: {', '.join(ARG_KINDS)})")
    return str(value)


def _arg_name(value: str) -> str:
    if not _ARG_NAME.fullmatch(value):
        raise ValueError(f"an argument's name is a word like 'since' (lowercase, digits, '_'), not {value!r}")
    return value


class Arg(Strict):
    """One argument of a command: a field a client draws as a control, never a syntax."""

    name: Annotated[StrictStr, AfterValidator(_arg_name)]
    kind: Annotated[str, PlainValidator(_kind)]
    label: Line
    default: Any = None
    choices: Annotated[tuple[Line, ...], AfterValidator(unique)] = ()

    @model_validator(mode="after")
    def _fits(self) -> Arg:
        if self.kind == "choice" and not self.choices:
            raise Refusal("a choice needs choices: the options a person picks from", "kind")
        if self.kind != "choice" and self.choices:
            raise Refusal(f"choices: belong to a choice, not a {self.kind}", "choices")
        if self.default is not None:
            why = _bad_default(self.kind, self.default, self.choices)
            if why:
                raise Refusal(f"default: {why}", "default")
        return self


def _bad_default(kind: str, value: object, choices: tuple[str, ...]) -> str | None:
    match kind:
        case "span":
            if isinstance(value, str) and parse_span(value) is not None:
                return None
            return f"a span is written like 2d, 48h or '1 week', not {value!r}"
        case "choice":
            return None if value in choices else f"{value!r} is not one of the choices ({', '.join(choices)})"
        case "person":
            if value == "me" or (isinstance(value, str) and _USER_ID.fullmatch(value)):
                return None
            return f"a person is 'me' (whoever runs it) or a user id like @ann:example.org, not {value!r}"
        case "boolean":
            return None if isinstance(value, bool) else f"a boolean is true or false, not {value!r}"
        case "number":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return None if ok else f"a number, not {value!r}"
        case _:
            return None if isinstance(value, str) else f"text, not {value!r}"


def _args(values: tuple[Arg, ...]) -> tuple[Arg, ...]:
    unique(tuple(arg.name for arg in values))
    return values


class CommandFile(Strict):
    """The front matter of ``content/commands/<name>.md``."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)

    hint: Line | None = None
    bot: Name | None = None
    tool: Name | None = None
    audience: AudienceField | None = Field(default=None, alias="for")
    surfaces: tuple[StrictStr, ...] | None = None  # where commands are offered: ``command_file(kinds)``
    args: Annotated[tuple[Arg, ...], AfterValidator(_args)] = ()

    @model_validator(mode="after")
    def _one_target(self) -> CommandFile:
        if (self.bot is None) == (self.tool is None):
            at = ("tool",) if self.bot is not None else ()
            raise Refusal("a command either asks a bot (bot: <slug>) or runs a tool (tool: <name>), one of them", *at)
        return self


class Command(CommandFile):
    """A compiled command. ``surfaces`` is where it is offered (its file's, else its bot's, else
    rooms); ``prompt`` is for the worker only — a client sends the name and the arguments."""

    name: str
    prompt: str
    source_path: str
    file: CommandFile | None = Field(default=None, exclude=True)

    def shape(self) -> dict[str, Any]:
        """What a client may see: enough to draw the form, nothing of the prompt."""
        return self.model_dump(mode="json", by_alias=True, include={"name", "hint", "args"})


def tool_file(kinds: Kinds) -> type[ToolFile]:
    """A tool file's front matter as this deployment lets it be written: ``needs:`` one of its surfaces that
    a tool may need."""
    return kinds.model(ToolFile, lambda: {"needs": (kinds.one_of(kinds.needed) | None, None)})


def command_file(kinds: Kinds) -> type[CommandFile]:
    """A command file's front matter as this deployment lets it be written: ``surfaces:`` where it offers
    commands."""
    return kinds.model(CommandFile, lambda: {
        "surfaces": (Annotated[tuple[kinds.one_of(kinds.commanded), ...], AfterValidator(unique)] | None, None)})  # type: ignore[misc]
