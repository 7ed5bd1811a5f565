"""summon.yaml: a bad setting is one line naming its key; secrets from the environment win."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from appservice.config import Config, load_config, parse_config, registration
from engine.errors import ConfigError

AS_TOKEN = "as-token-from-the-file-0123"
HS_TOKEN = "hs-token-from-the-file-0123"
DSN = "postgresql://summon@localhost/summon"

MINIMAL: dict[str, Any] = {
    "homeserver": {"url": "http://localhost:8008", "server_name": "localhost"},
    "appservice": {"address": "http://localhost:29333", "as_token": AS_TOKEN, "hs_token": HS_TOKEN},
    "database": {"dsn": DSN},
}


def minimal() -> dict[str, Any]:
    return copy.deepcopy(MINIMAL)


def without(dotted: str) -> dict[str, Any]:
    raw = minimal()
    *path, last = dotted.split(".")
    section = raw
    for part in path:
        section = section[part]
    del section[last]
    return raw


def with_(dotted: str, value: Any) -> dict[str, Any]:
    raw = minimal()
    *path, last = dotted.split(".")
    section = raw
    for part in path:
        section = section.setdefault(part, {})
    section[last] = value
    return raw


def error_of(raw: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, env or {})
    message = str(caught.value)
    assert "\n" not in message, f"not one line: {message!r}"
    assert message.startswith("config: ")
    return message


def test_a_minimal_config_parses_with_defaults() -> None:
    config = parse_config(minimal(), {})
    assert isinstance(config, Config)
    assert config.homeserver.url == "http://localhost:8008"
    assert config.homeserver.server_name == "localhost"
    assert config.appservice.as_token == AS_TOKEN
    assert config.appservice.hs_token == HS_TOKEN
    assert config.appservice.id == "summon"
    assert config.appservice.sender_localpart == "summon"
    assert (config.appservice.listen.host, config.appservice.listen.port) == ("127.0.0.1", 29333)
    assert config.database.dsn == DSN
    assert config.worker.slots == 256  # sized for model calls that take seconds (issue 18)
    assert config.content.dir == "content"


@pytest.mark.parametrize(
    "dotted",
    ["homeserver.url", "homeserver.server_name", "appservice.address", "appservice.as_token",
     "appservice.hs_token", "database.dsn", "homeserver", "database"],
)
def test_a_missing_key_is_named(dotted: str) -> None:
    message = error_of(without(dotted))
    assert message.startswith(f"config: {dotted}: ")
    assert "required" in message.lower()


@pytest.mark.parametrize(
    "dotted",
    ["bogus", "homeserver.bogus", "appservice.listen.bogus", "worker.slot"],
)
def test_an_unknown_key_is_named(dotted: str) -> None:
    message = error_of(with_(dotted, 1))
    assert message.startswith(f"config: {dotted}: ")


@pytest.mark.parametrize(
    ("dotted", "value"),
    [
        ("homeserver.url", "localhost:8008"),
        ("appservice.as_token", "short"),
        ("appservice.listen.port", 70000),
        ("database.dsn", "mysql://x"),
        ("worker.budget_seconds", 0),
    ],
)
def test_a_bad_value_is_named(dotted: str, value: Any) -> None:
    assert error_of(with_(dotted, value)).startswith(f"config: {dotted}: ")


ENV_AS = "as-token-from-the-environment"
ENV_HS = "hs-token-from-the-environment"
ENV_DSN = "postgres://env@db/summon"
ENV = {"SUMMON_AS_TOKEN": ENV_AS, "SUMMON_HS_TOKEN": ENV_HS, "SUMMON_DATABASE_DSN": ENV_DSN}


def test_the_environment_wins_over_the_file() -> None:
    raw = minimal()
    config = parse_config(raw, ENV)
    assert config.appservice.as_token == ENV_AS
    assert config.appservice.hs_token == ENV_HS
    assert config.database.dsn == ENV_DSN
    assert config.appservice.address == MINIMAL["appservice"]["address"], "only the secret is replaced"
    assert raw == MINIMAL, "the file's mapping is not changed"


@pytest.mark.parametrize(
    ("var", "dotted"),
    [("SUMMON_AS_TOKEN", "appservice.as_token"), ("SUMMON_HS_TOKEN", "appservice.hs_token"),
     ("SUMMON_DATABASE_DSN", "database.dsn")],
)
def test_the_environment_supplies_a_secret_missing_from_the_file(var: str, dotted: str) -> None:
    config = parse_config(without(dotted), {var: ENV[var]})
    section, key = dotted.split(".")
    assert getattr(getattr(config, section), key) == ENV[var]


def test_a_whole_section_can_come_from_the_environment() -> None:
    raw = minimal()
    del raw["database"]
    assert parse_config(raw, ENV).database.dsn == ENV_DSN


def test_an_empty_environment_variable_does_not_override() -> None:
    config = parse_config(minimal(), {"SUMMON_AS_TOKEN": ""})
    assert config.appservice.as_token == AS_TOKEN


def test_a_bad_secret_from_the_environment_is_named() -> None:
    assert error_of(minimal(), {"SUMMON_HS_TOKEN": "short"}).startswith("config: appservice.hs_token: ")


def test_load_config_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "summon.yaml"
    path.write_text(yaml.safe_dump(MINIMAL), encoding="utf-8")
    assert load_config(path, {}) == parse_config(minimal(), {})
    assert load_config(path, ENV).database.dsn == ENV_DSN


def test_load_config_bad_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "summon.yaml"
    path.write_text("homeserver:\n  url: http://x\n  server_name: a: b\ndatabase: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    # The line of the problem, counted from 1 (the colon inside the value on line 3).
    assert str(caught.value) == f"config: {path}:3: not valid YAML"


def test_load_config_tab_indentation_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "summon.yaml"
    path.write_text("homeserver:\n  url: x\n\tserver_name: y\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^config: {re.escape(str(path))}:3: not valid YAML$"):
        load_config(path, {})


def test_load_config_refuses_a_top_level_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "summon.yaml"
    path.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(path, {})


def test_load_config_empty_file_names_the_first_missing_section(tmp_path: Path) -> None:
    path = tmp_path / "summon.yaml"
    path.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^config: homeserver: "):
        load_config(path, {})


def test_load_config_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=rf"^config: cannot read {re.escape(str(path))}: "):
        load_config(path, {})


def test_registration() -> None:
    config = parse_config(with_("appservice.id", "summon-dev"), {})
    reg = registration(config)
    assert reg["id"] == "summon-dev"
    assert reg["url"] == "http://localhost:29333"
    assert reg["as_token"] == AS_TOKEN
    assert reg["hs_token"] == HS_TOKEN
    assert reg["sender_localpart"] == "summon"
    assert reg["rate_limited"] is False
    assert reg["receive_ephemeral"] is True
    users = reg["namespaces"]["users"]
    assert {"exclusive": True, "regex": "@bot_.*:localhost"} in users
    assert {"exclusive": True, "regex": "@summon:localhost"} in users
    assert all(ns["exclusive"] is True for ns in users)
    assert reg["namespaces"]["rooms"] == [] and reg["namespaces"]["aliases"] == []


def test_registration_follows_the_address_and_sender() -> None:
    raw = with_("appservice.address", "https://summon.internal:8443")
    raw["appservice"]["sender_localpart"] = "summoner"
    reg = registration(parse_config(raw, {}))
    assert reg["url"] == "https://summon.internal:8443"
    assert {"exclusive": True, "regex": "@summoner:localhost"} in reg["namespaces"]["users"]


def test_registration_regex_escapes_the_server_name() -> None:
    raw = with_("homeserver.server_name", "example.org")
    regexes = [ns["regex"] for ns in registration(parse_config(raw, {}))["namespaces"]["users"]]
    bots = re.compile(regexes[0])
    assert bots.fullmatch("@bot_helper:example.org")
    assert not bots.fullmatch("@bot_helper:exampleXorg")
    assert not bots.fullmatch("@alice:example.org")


def test_registration_is_valid_yaml_round_trip() -> None:
    reg = registration(parse_config(minimal(), {}))
    assert yaml.safe_load(yaml.safe_dump(reg)) == reg


def test_an_openapi_tools_secret_header_comes_from_the_environment_or_the_service_does_not_start() -> None:
    from appservice.config import openapi_headers

    raw = copy.deepcopy(MINIMAL)
    raw["tools"] = {"openapi_headers": {"shop": {"Authorization": "SHOP_API_TOKEN"}}}
    with pytest.raises(ConfigError, match=r"tools\.openapi_headers\.shop\.Authorization: the environment "
                                          r"variable SHOP_API_TOKEN is not set"):
        parse_config(raw, {})
    env = {"SHOP_API_TOKEN": "Bearer s3cret"}
    config = parse_config(raw, env)
    assert openapi_headers(config, env) == {"shop": {"Authorization": "Bearer s3cret"}}
    assert "s3cret" not in config.model_dump_json()  # the config holds the variable's name, never the secret


@pytest.mark.parametrize("prefix", ["http://example.org/docs/", "https://user@example.org/", "example.org/docs"])
def test_a_fetch_prefix_that_is_not_a_plain_https_url_is_a_config_error(prefix: str) -> None:
    raw = copy.deepcopy(MINIMAL)
    raw["tools"] = {"fetch_allow": ["https://example.org/docs/", prefix]}
    with pytest.raises(ConfigError, match=r"^config: tools\.fetch_allow: "):
        parse_config(raw, {})
    raw["tools"] = {"fetch_allow": ["https://example.org/docs/"]}
    assert parse_config(raw, {}).tools.fetch_allow == ["https://example.org/docs/"]


def test_invites_are_local_by_default_and_take_any_or_a_list_of_servers() -> None:
    assert parse_config(minimal(), {}).appservice.invites == "local"
    assert parse_config(with_("appservice.invites", "any"), {}).appservice.invites == "any"
    listed = parse_config(with_("appservice.invites", ["example.org", "chat.example.net:8448"]), {})
    assert listed.appservice.invites == ("example.org", "chat.example.net:8448")


@pytest.mark.parametrize("value", ["everyone", [], ["not a server!"], 3])
def test_a_bad_invite_policy_is_one_line_naming_the_key(value: Any) -> None:
    assert error_of(with_("appservice.invites", value)).startswith("config: appservice.invites: ")


def test_the_deployments_caps_default_to_no_daily_cap_and_three_live_runs_a_person() -> None:
    limits = parse_config(minimal(), {}).limits
    assert (limits.daily_spend, limits.live_runs_per_person) == (None, 3)
    capped = parse_config(with_("limits.daily_spend", 20), {}).limits.caps()
    assert (capped.daily_spend, capped.live_runs_per_person) == (20.0, 3)
    assert "limits.live_runs_per_person" in error_of(with_("limits.live_runs_per_person", 0))
    assert "limits.daily_spend" in error_of(with_("limits.daily_spend", -1))
