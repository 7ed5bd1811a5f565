"""The `summon` command and the dev scripts, as an operator meets them: one clear line, the right exit."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def summon(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "appservice", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_check_prints_every_error_as_path_line_message_and_exits_1(tmp_path: Path) -> None:
    bots = tmp_path / "bots"
    bots.mkdir()
    (bots / "good.md").write_text("---\nname: Good\n---\nHello.\n")
    (bots / "bad.md").write_text("---\nname: Bad\ncolour: blue\n---\nHello.\n")
    (bots / "worse.md").write_text("---\nname: Worse\nlimits: {steps: 0}\n---\nHello.\n")
    result = summon("check", str(tmp_path), "--server-name", "localhost")
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{tmp_path}/bots/bad.md:3: ") and "colour" in lines[0]
    assert lines[1].startswith(f"{tmp_path}/bots/worse.md:3: ") and "steps" in lines[1]


def test_check_passes_the_shipped_content() -> None:
    result = summon("check", "content", "--server-name", "localhost")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_bad_setting_stops_start_up_with_one_line_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "summon.yaml"
    config.write_text("homeserver: {url: 'http://127.0.0.1:8008', server_name: localhost}\n"
                      "appservice: {address: 'http://127.0.0.1:29333', as_token: short, hs_token: hhhhhhhhhhhhhhhhhh}\n"
                      "database: {dsn: 'postgresql://x@127.0.0.1:1/x'}\n")
    result = summon("-c", str(config), "serve")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "appservice.as_token" in result.stderr


def test_serving_for_real_takes_no_scripted_model_turns() -> None:
    # A script reaches a run only from a trusted caller (the tests, the demo): `summon serve` has no way in.
    result = summon("serve", "--accept-scripts")
    assert result.returncode == 2
    assert "unrecognized arguments: --accept-scripts" in result.stderr
    source = (REPO / "appservice" / "__main__.py").read_text(encoding="utf-8")
    assert "scripts" not in source


def test_a_missing_config_file_is_one_line(tmp_path: Path) -> None:
    result = summon("-c", str(tmp_path / "nope.yaml"), "publish")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("summon: config: cannot read")
    assert result.stderr.strip().count("\n") == 0


def test_registration_is_written_from_the_config(tmp_path: Path) -> None:
    config = tmp_path / "summon.yaml"
    config.write_text((REPO / "summon.example.yaml").read_text())
    out = tmp_path / "registration.yaml"
    env_token = "env-as-token-0123456789"
    result = subprocess.run([sys.executable, "-m", "appservice", "registration", "-c", str(config), "-o", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "SUMMON_AS_TOKEN": env_token})
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert f"as_token: {env_token}" in text
    assert "@bot_.*:example\\.org" in text
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # it holds both tokens


def test_registration_written_over_a_readable_file_is_made_private(tmp_path: Path) -> None:
    config = tmp_path / "summon.yaml"
    config.write_text((REPO / "summon.example.yaml").read_text())
    out = tmp_path / "registration.yaml"
    out.write_text("old\n")
    out.chmod(0o644)
    result = summon("-c", str(config), "registration", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "hs_token:" in out.read_text() and "old" not in out.read_text()


def test_up_refuses_a_taken_port_with_a_clear_message(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "SUMMON_RUN_DIR": str(tmp_path / "run"), "SUMMON_HS_PORT": str(port),
               "SUMMON_PG_PORT": "55499", "SUMMON_AS_PORT": "29399"}
        result = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"port {port} (for Synapse) is already taken" in result.stderr
    assert "SUMMON_HS_PORT" in result.stderr
    assert not (tmp_path / "run" / "pids" / "postgres.pid").exists()


def test_the_shipped_registration_is_what_summon_registration_writes() -> None:
    # registration.yaml at the top level shows an operator the file's shape; it must never drift from what
    # `summon registration` writes for the example config (same keys, same values, placeholder tokens).
    import yaml

    result = summon("registration", "-c", "summon.example.yaml", "-o", "-")
    assert result.returncode == 0, result.stderr
    written = yaml.safe_load(result.stdout)
    shipped = yaml.safe_load((REPO / "registration.yaml").read_text(encoding="utf-8"))
    assert shipped == written
    assert shipped["as_token"].startswith("CHANGE-ME") and shipped["hs_token"].startswith("CHANGE-ME")


def test_without_a_config_here_the_running_demos_config_is_found(tmp_path: Path) -> None:
    # After `make dev`, `summon runs` (or status, registration …) works from anywhere without -c: the demo's
    # run directory holds the config it wrote.
    demo = tmp_path / "run"
    demo.mkdir()
    config = (REPO / "summon.example.yaml").read_text().replace("example.org", "demo.test")
    (demo / "summon.yaml").write_text(config)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SUMMON_CONFIG"}
    result = subprocess.run([sys.executable, "-m", "appservice", "registration", "-o", "-"], cwd=elsewhere,
                            capture_output=True, text=True, timeout=60, env={**env, "SUMMON_RUN_DIR": str(demo),
                                                                             "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert "demo\\.test" in result.stdout
    # With no demo running either, the error names the file it looked for, in one line.
    (demo / "summon.yaml").unlink()
    result = subprocess.run([sys.executable, "-m", "appservice", "registration", "-o", "-"], cwd=elsewhere,
                            capture_output=True, text=True, timeout=60, env={**env, "SUMMON_RUN_DIR": str(demo),
                                                                             "PYTHONPATH": str(REPO)})
    assert result.returncode == 2
    assert result.stderr.strip() == "summon: config: cannot read summon.yaml: No such file or directory"
