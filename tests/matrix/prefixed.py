"""A second deployment on the tests' Synapse, with a puppet prefix of its own (``appservice.puppet_prefix``):
its registration is written before Synapse starts (``SUMMON_EXTRA_REGISTRATIONS``), so the homeserver holds
its namespace as it would a real deployment's."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path
from typing import Any

import yaml

from appservice.config import parse_config, registration

PREFIX = "ai_"
SENDER = "summon_ai"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prefixed_raw(env: dict[str, str], dsn: str) -> dict[str, Any]:
    """The second deployment's summon.yaml, as a mapping (``env``: the stack's, with the SUMMON_PREFIXED_* keys)."""
    port = int(env["SUMMON_PREFIXED_AS_PORT"])
    return {
        "homeserver": {"url": f"http://127.0.0.1:{env['SUMMON_HS_PORT']}", "server_name": env["SUMMON_SERVER_NAME"]},
        "appservice": {"id": "summon-prefixed", "address": f"http://127.0.0.1:{port}",
                       "listen": {"host": "127.0.0.1", "port": port},
                       "as_token": env["SUMMON_PREFIXED_AS_TOKEN"], "hs_token": env["SUMMON_PREFIXED_HS_TOKEN"],
                       "sender_localpart": SENDER, "puppet_prefix": PREFIX, "display_name": "Summon AI"},
        "database": {"dsn": dsn},
    }


def write_registration(folder: Path, hs_port: str, server_name: str) -> tuple[Path, dict[str, str]]:
    """The second deployment's registration file (what `summon registration` writes), and the keys the stack's
    env gains for the tests to build its config from."""
    env = {"SUMMON_PREFIXED_AS_PORT": str(_free_port()), "SUMMON_PREFIXED_AS_TOKEN": "as_" + secrets.token_hex(16),
           "SUMMON_PREFIXED_HS_TOKEN": "hs_" + secrets.token_hex(16), "SUMMON_PREFIXED_REGISTRATION": "",
           "SUMMON_HS_PORT": hs_port, "SUMMON_SERVER_NAME": server_name}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "registration.yaml"
    config = parse_config(prefixed_raw(env, "postgresql://unused/unused"), {})
    path.write_text(yaml.safe_dump(registration(config)), encoding="utf-8")
    env["SUMMON_PREFIXED_REGISTRATION"] = str(path)
    del env["SUMMON_HS_PORT"], env["SUMMON_SERVER_NAME"]
    return path, env
