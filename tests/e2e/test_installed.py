"""summon as an operator installs it: a wheel built from the sources, installed into a fresh virtualenv with no
checkout on its path, run from a folder of the operator's own — `summon check`, `summon publish` (which migrates:
the SQL has to be in the wheel) and `summon serve`, and a mention answered. Everything the code opens by path
at run time (the SQL, the content kit, prices, the desk's static files, the demo's scripts) has to ship in it.
`summon dev` runs from a checkout only (the throwaway stack's scripts are not in the wheel) and says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.e2e.support import REPO, Person, Summon, own_stack

UV = REPO / ".dev" / "tools" / "bin" / "uv"
# What a source tree holds that is no source: history, environments, caches, run state, a browser kit.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", ".dev", "__pycache__", "*.egg-info", "build", "dist",
                                     ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules")
# The checkout's own: an installed summon must find everything without them.
CHECKOUT_ENV = ("PYTHONPATH", "VIRTUAL_ENV", "SUMMON_CONFIG")


def uv(*args: str, timeout: float = 300) -> str:
    assert UV.exists(), f"{UV} is missing: scripts/bootstrap installs it (make install)"
    done = subprocess.run([str(UV), *args], capture_output=True, text=True, timeout=timeout,
                          env={k: v for k, v in os.environ.items() if k not in CHECKOUT_ENV})
    assert done.returncode == 0, f"uv {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def install(tmp: Path) -> Path:
    """A fresh virtualenv holding summon's wheel (built from a copy of the sources) and its dependencies."""
    sources = tmp / "sources"
    shutil.copytree(REPO, sources, ignore=NOT_SOURCES, symlinks=True)
    uv("build", "-q", "--wheel", "--out-dir", str(tmp / "dist"), str(sources))
    wheel = next((tmp / "dist").glob("summon-*.whl"))
    venv = tmp / "venv"
    python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    uv("venv", "-q", "-p", str(python), str(venv))
    uv("pip", "install", "-q", "-p", str(venv / "bin" / "python"), str(wheel))
    shutil.rmtree(sources)
    return venv


def run(venv: Path, args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([str(venv / "bin" / "summon"), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"summon {' '.join(args)} ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


async def test_a_wheel_installed_elsewhere_checks_publishes_serves_and_answers(tmp_path: Path) -> None:
    venv = install(tmp_path)
    # The operator's folder: their summon.yaml and their content, nowhere near the checkout.
    site = tmp_path / "site"
    shutil.copytree(REPO / "content", site / "content")
    with own_stack("installed") as stack:
        env = {k: v for k, v in stack.items() if k not in CHECKOUT_ENV}
        env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}", SUMMON_AGENT_MOCK="1")
        data = yaml.safe_load(Path(stack["SUMMON_CONFIG"]).read_text())
        data["content"] = {"dir": "content"}
        (site / "summon.yaml").write_text(yaml.safe_dump(data))

        where = subprocess.run([str(venv / "bin" / "python"), "-c", "import engine; print(engine.__file__)"],
                               env=env, cwd=site, capture_output=True, text=True, timeout=60)
        assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()), where
        assert "content: ok" in run(venv, ["check"], env, site)
        dev = subprocess.run([str(venv / "bin" / "summon"), "dev"], env=env, cwd=site, capture_output=True,
                             text=True, timeout=60)
        assert (dev.returncode, dev.stdout) == (1, ""), dev
        assert dev.stderr.startswith("summon dev runs from a checkout of summon only"), dev.stderr
        run(venv, ["publish"], env, site)

        serve = Summon(["serve"], env, tmp_path / "serve.log", cwd=site, program=[str(venv / "bin" / "summon")])
        person: Person | None = None
        try:
            await serve.wait_for("appservice listening")
            person = await Person.register(stack["SUMMON_HS_URL"], "operator")
            room = await person.room_with(f"@bot_helper:{stack['SUMMON_SERVER_NAME']}")
            asked = await person.say(room, "Helper, hello from an installed summon")
            answers = await person.answers(room, [asked], timeout=90)
            assert asked in answers, serve.output()[-3000:]
        finally:
            if person is not None:
                await person.close()
            await serve.interrupt(timeout=20)
        assert "Traceback" not in serve.output(), serve.output()[-3000:]
