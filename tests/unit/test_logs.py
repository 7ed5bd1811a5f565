"""The process's log lines: fields shown, the run's fields lent, secrets masked even where a library let one in."""

from __future__ import annotations

import io
import json
import logging
import re
from typing import Annotated, Any, get_args, get_origin

import yaml
from pydantic import BaseModel

from appservice.config import SECRET, Config, parse_config
from appservice.logs import handler, secrets_in, secrets_of
from engine.logfields import about_run
from tests.unit.test_example_config import EXAMPLE


def logged(fmt: str, secrets: list[str], emit: object) -> str:
    out = io.StringIO()
    log = logging.getLogger(f"test.logs.{fmt}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    h = handler(fmt, secrets, stream=out)  # type: ignore[arg-type]
    log.addHandler(h)
    try:
        emit(log)  # type: ignore[operator]
    finally:
        log.removeHandler(h)
    return out.getvalue()


def test_text_lines_show_what_they_are_about() -> None:
    text = logged("text", [], lambda log: log.info("sent %s", "$ev", extra={"room": "!r:x", "run": 7}))
    assert text.rstrip().endswith("sent $ev [run=7 room=!r:x]")


def test_a_line_inside_a_held_run_carries_the_run_bot_and_room() -> None:
    def emit(log: logging.Logger) -> None:
        with about_run(42, "helper", "!room:x"):
            log.warning("provider slow")
        log.warning("outside")

    first, second = (json.loads(line) for line in logged("json", [], emit).splitlines())
    assert (first["run"], first["bot"], first["room"], first["level"]) == (42, "helper", "!room:x", "warning")
    assert "run" not in second


def test_a_secret_that_turns_up_anywhere_is_masked() -> None:
    secret = "hs_0123456789abcdef"

    def emit(log: logging.Logger) -> None:
        try:
            raise ValueError(f"bad token {secret}")
        except ValueError:
            log.exception("request failed with Authorization: Bearer %s", secret, extra={"txn": secret})

    for fmt in ("text", "json"):
        out = logged(fmt, [secret], emit)
        assert secret not in out and "***" in out


def test_the_deployments_secrets_are_the_tokens_password_hook_secrets_and_keys() -> None:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["database"]["dsn"] = "postgresql://summon:pg-pass-123@db/summon"
    raw["hooks"]["keys"] = {"shop": {"secret": "hook-secret-0123456789", "events": ["site.*"], "rooms": ["*"]}}
    config = parse_config(raw, {})
    found = secrets_of(config, {"SUMMON_PROVIDER_OPENAI_KEY": "sk-1234567", "SUMMON_PROVIDERS": "openai"})
    assert set(found) == {config.appservice.as_token, config.appservice.hs_token, "pg-pass-123",
                          "hook-secret-0123456789", "sk-1234567"}


def test_the_speech_endpoints_keys_are_secrets_too() -> None:
    raw = yaml.safe_load(EXAMPLE.read_text())
    config = parse_config(raw, {})
    found = secrets_of(config, {"SUMMON_STT_KEY": "stt-key-0123456", "SUMMON_TTS_KEY": "tts-key-0123456",
                                "SUMMON_STT_URL": "http://127.0.0.1:9/v1"})
    assert {"stt-key-0123456", "tts-key-0123456"} <= set(found)
    assert "http://127.0.0.1:9/v1" not in found


def test_member_bots_keys_are_secrets_whichever_way_they_are_given() -> None:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["members"] = {"keys": ["k1:vCI0oiG1jquvdXKDqzKntMy34ekGKiBQeQbFE8rwJBs="]}
    config = parse_config(raw, {})
    assert "vCI0oiG1jquvdXKDqzKntMy34ekGKiBQeQbFE8rwJBs=" in secrets_of(config, {})
    from_env = parse_config(raw, {"SUMMON_MEMBER_KEYS": "k2:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="})
    assert "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" in secrets_of(from_env, {})
    out = logged("text", secrets_of(config, {}), lambda log: log.info(
        "could not open with %s", "vCI0oiG1jquvdXKDqzKntMy34ekGKiBQeQbFE8rwJBs="))
    assert "vCI0oiG1" not in out and "***" in out


def _classes(model: type[BaseModel]) -> list[type[BaseModel]]:
    """Every settings section reachable from ``model``, through fields, dicts, lists and optionals."""
    seen: list[type[BaseModel]] = []

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in seen:
                seen.append(annotation)
                for field in annotation.model_fields.values():
                    visit(field.annotation)
            return
        for arg in get_args(annotation):
            visit(arg)

    visit(model)
    return seen


def _marked(field: Any) -> bool:
    def inner(annotation: Any) -> bool:
        if get_origin(annotation) is Annotated and SECRET in annotation.__metadata__:
            return True
        return any(inner(arg) for arg in get_args(annotation))
    return SECRET in field.metadata or inner(field.annotation)


# Names that say "secret" but hold none: a key's id, and the names of environment variables holding secrets.
NOT_SECRETS = {("Door", "signing_key"), ("Desk", "token_days"), ("Desk", "token_max_days")}


def _sections(field: Any) -> bool:
    """A field holding settings sections (``hooks.keys``: id -> a key's section): their own fields are checked."""
    def inner(annotation: Any) -> bool:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return True
        return any(inner(arg) for arg in get_args(annotation))
    return inner(field.annotation)


def test_every_setting_named_like_a_secret_is_declared_one() -> None:
    # Derived from the config model: a new token, key or secret added without being declared a Secret fails here.
    named = re.compile(r"secret|token|password|(^|_)keys?$")
    undeclared = [f"{cls.__name__}.{name}" for cls in _classes(Config) for name, field in cls.model_fields.items()
                  if named.search(name) and not _marked(field) and not _sections(field)
                  and (cls.__name__, name) not in NOT_SECRETS]
    assert undeclared == []


def test_every_declared_secret_the_config_holds_is_masked() -> None:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["hooks"]["keys"] = {"shop": {"secret": "hook-secret-0123456789", "events": ["site.*"], "rooms": ["*"]}}
    raw["members"] = {"keys": ["k1:vCI0oiG1jquvdXKDqzKntMy34ekGKiBQeQbFE8rwJBs="]}
    raw["door"] = {"keys": {"k1": "door-key-" + "d" * 32}, "signing_key": "k1"}
    raw["desk"] = {"secret": "desk-secret-" + "s" * 32, "inboxes": {"web": {
        "title": "Help", "staff_key": "staff-key-0123456789", "identity_secret": "identity-secret-0123456789",
        "webhooks": [{"url": "https://example.org/hook", "secret": "webhook-secret-0123456"}]}}}
    config = parse_config(raw, {})
    declared = set(secrets_in(config))
    for value in (config.appservice.as_token, config.appservice.hs_token, "hook-secret-0123456789",
                  "door-key-" + "d" * 32, "desk-secret-" + "s" * 32, "staff-key-0123456789",
                  "identity-secret-0123456789", "webhook-secret-0123456",
                  "k1:vCI0oiG1jquvdXKDqzKntMy34ekGKiBQeQbFE8rwJBs="):
        assert value in declared, value
    secrets = secrets_of(config, {})
    for value in declared:
        out = logged("json", secrets, lambda log, v=value: log.warning("it said %s", v))  # type: ignore[misc]
        assert value not in out and "***" in out
