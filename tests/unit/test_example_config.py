"""summon.example.yaml is the documentation of the config: it must load, and name every setting."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel

from appservice.config import Config, parse_config

EXAMPLE = Path(__file__).resolve().parents[2] / "summon.example.yaml"


def keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, field in model.model_fields.items():
        out.add(prefix + name)
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= keys(ann, f"{prefix}{name}.")
    return out


def flatten(data: dict[str, object], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in data.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= flatten(v, f"{prefix}{k}.")
    return out


def test_the_example_config_loads() -> None:
    config = parse_config(yaml.safe_load(EXAMPLE.read_text()), {})
    assert config.homeserver.server_name == "example.org"


def test_the_example_config_names_every_setting() -> None:
    assert keys(Config) == flatten(yaml.safe_load(EXAMPLE.read_text()))
