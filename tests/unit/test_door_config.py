"""The door's settings (summon.yaml `door:`): off unless configured, and a bad one is one line naming its key."""

from __future__ import annotations

from typing import Any

import pytest

from appservice.config import parse_config
from engine.errors import ConfigError
from tests.unit.test_config import minimal

KEY = "k" * 32


def with_door(door: dict[str, Any]) -> dict[str, Any]:
    return {**minimal(), "door": door}


def test_no_door_unless_configured() -> None:
    assert parse_config(minimal(), {}).door is None
    door = parse_config(with_door({"keys": {"k1": KEY}, "signing_key": "k1"}), {}).door
    assert door is not None and door.listen is None  # a door with no listener: workers still hand turns over
    assert door.audience_for("example.org") == "summon-door:example.org"
    assert (door.minutes, door.start) == (15.0, True)


@pytest.mark.parametrize(("door", "key"), [
    ({"keys": {"k1": KEY}, "signing_key": "k2"}, "door.signing_key"),
    ({"keys": {"k1": "short"}, "signing_key": "k1"}, "door.keys.k1"),
    ({"keys": {}, "signing_key": "k1"}, "door.keys"),
    ({"keys": {"k1": KEY}, "signing_key": "k1", "minutes": 45}, "door.minutes"),
    ({"keys": {"k1": KEY}, "signing_key": "k1", "listen": {"port": 0}}, "door.listen.port"),
    ({"keys": {"k1": KEY}, "signing_key": "k1", "colour": "blue"}, "door.colour"),
])
def test_a_bad_door_setting_is_one_line_naming_its_key(door: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(with_door(door), {})
    assert str(caught.value).startswith(f"config: {key}:") and "\n" not in str(caught.value)
