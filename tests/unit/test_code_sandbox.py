"""How a code tool's process is made (issue 12, item 6), from the config: its limits, and the only environment
variables it is handed — never summon's own, whatever the config says."""

from __future__ import annotations

import pytest

from appservice.config import code_sandbox, parse_config
from engine.content.code import SIGNATURE
from engine.errors import ConfigError
from engine.sandbox.box import CodeLimits, Sandbox
from engine.tools import code_process
from tests.unit.test_config import minimal


def with_code(**code: object) -> dict[str, object]:
    raw = minimal()
    raw["tools"] = {"code": code}
    return raw


def test_the_config_makes_the_sandbox() -> None:
    config = parse_config(with_code(seconds=5, load_seconds=2, memory_mb=256, processes=8, env=["WEATHER_API_KEY"]),
                          {})
    box = code_sandbox(config, {})
    assert box == Sandbox(CodeLimits(seconds=5, load_seconds=2, memory_bytes=256 * 1024 * 1024, processes=8),
                          ("WEATHER_API_KEY",))
    # The root reads the named variables' values from the environment it is handed; nothing else of it is kept.
    handed = code_sandbox(config, {"WEATHER_API_KEY": "wk", "SUMMON_AS_TOKEN": "secret"})
    assert handed.given == {"WEATHER_API_KEY": "wk"} and "wk" not in repr(handed)
    assert box.limits.child() == {"cpu_seconds": 7, "memory_bytes": 256 * 1024 * 1024,
                                  "file_bytes": 64 * 1024 * 1024, "processes": 8}


@pytest.mark.parametrize(("name", "why"), [
    ("SUMMON_DATABASE_DSN", "config: tools.code.env: Value error, SUMMON_DATABASE_DSN is summon's own; a code tool "
                            "is never handed it"),
    ("AGENTS_LIVE", "config: tools.code.env: Value error, AGENTS_LIVE is summon's own; a code tool is never "
                    "handed it"),
    ("NOT A NAME", "config: tools.code.env: Value error, 'NOT A NAME' is not an environment variable's name"),
])
def test_summons_own_secrets_can_never_be_handed_on(name: str, why: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(with_code(env=[name]), {})
    assert str(refused.value) == why


def test_only_the_named_variables_and_a_fixed_few_are_handed_on() -> None:
    service = {"WEATHER_API_KEY": "wk", "SUMMON_AS_TOKEN": "secret", "PATH": "/opt/evil/bin", "PYTHONPATH": "/x"}
    box = Sandbox(env=("WEATHER_API_KEY", "ABSENT"), given=service)
    assert box.environment() == {
        "WEATHER_API_KEY": "wk", "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "HOME": "/tmp", "TMPDIR": "/tmp"}  # the jail's own in-memory /tmp


def test_the_child_says_the_contract_as_the_compile_does() -> None:
    assert code_process.SIGNATURE == SIGNATURE
