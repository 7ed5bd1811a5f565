"""What an idle service costs: CPU seconds of one ``summon serve`` and one ``summon worker`` process (and of
PostgreSQL) over 30 idle seconds, and each process's resident memory, on a real PostgreSQL and Synapse.
Targets: CPU ~0 (≤ 0.3 s each over the 30 s), RSS ≤ 80 MB each (issue 27); writes ``.dev/bench/idle.json``. Asserts
nothing. Run: ``python -m tests.bench.idle``; ``--features``: instead, ``summon serve`` alone with each optional surface or
feature on in turn (desk, door, member bots, metrics) and what each adds (``.dev/bench/idle_features.json``).

The processes run on their own (the stand-in model, chosen with ``SUMMON_AGENT_MOCK=1``), are left to
settle, and then nothing at all happens for the measured seconds: whatever CPU they use is their own polling.
Ports default to 55437/8013/29338 (``SUMMON_BENCH_PG_PORT`` / ``_HS_PORT`` / ``_AS_PORT`` to move them).
"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.bench.results import Ratio, write

REPO = Path(__file__).resolve().parents[2]
RUN_DIR = REPO / ".dev" / "bench-idle-run"
PORTS = {
    "SUMMON_PG_PORT": os.environ.get("SUMMON_BENCH_PG_PORT", "55437"),
    "SUMMON_HS_PORT": os.environ.get("SUMMON_BENCH_HS_PORT", "8013"),
    "SUMMON_AS_PORT": os.environ.get("SUMMON_BENCH_AS_PORT", "29338"),
}
SETTLE_SECONDS = 15.0
IDLE_SECONDS = 30.0
FEATURE_SETTLE_SECONDS = 12.0
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid: int) -> float:
    """Resident memory (``VmRSS``) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def postgres_pids() -> list[int]:
    """Every process of the bench's PostgreSQL (the postmaster and its backends)."""
    master = int((RUN_DIR / "pg" / "data" / "postmaster.pid").read_text().split()[0])
    out = [master]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == master:
                    out.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def total(pids: list[int]) -> float:
    seconds = 0.0
    for pid in pids:
        try:
            seconds += cpu_seconds(pid)
        except OSError:
            continue
    return seconds


def features(base: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The config turning each optional surface or feature on, beside the default's (``--features``): what each
    adds to an idle ``summon serve`` (speech and memory are in the default: their modules load when a bot uses them)."""
    port = int(PORTS["SUMMON_AS_PORT"])
    host = "127.0.0.1"
    return {
        "desk": {"desk": {"listen": {"host": host, "port": port + 5}, "secret": secrets.token_hex(32),
                          "inboxes": {"web": {"identifier": "web", "title": "Bench", "daily_spend": 5,
                                              "staff_key": secrets.token_hex(24)}}}},
        "door": {"door": {"listen": {"host": host, "port": port + 6}, "keys": {"k1": secrets.token_hex(32)},
                          "signing_key": "k1"}},
        "members": {"members": {"keys": [f"k1:{base64.b64encode(secrets.token_bytes(32)).decode()}"]}},
        "metrics": {"metrics": {**(base.get("metrics") or {}), "listen": {"host": host, "port": port + 7}}},
    }


def feature_rss(serve_env: dict[str, str], config: Path) -> dict[str, float]:
    """``summon serve`` alone with each feature on, settled: its RSS, and what it adds to the default's."""
    base = yaml.safe_load(config.read_text())
    out: dict[str, float] = {}
    for name, section in {"default": {}, **features(base)}.items():
        path = RUN_DIR / f"summon-{name}.yaml"
        path.write_text(yaml.safe_dump({**base, **section}))
        log = (RUN_DIR / f"serve-{name}.log").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", "appservice", "serve"], cwd=REPO,
                                env={**serve_env, "SUMMON_CONFIG": str(path)}, stdout=log, stderr=subprocess.STDOUT)
        try:
            time.sleep(FEATURE_SETTLE_SECONDS)
            if proc.poll() is not None:
                print(f"  {name}: summon serve exited; see {RUN_DIR / f'serve-{name}.log'}", file=sys.stderr)
                continue
            out[name] = rss_mb(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        added = f" ({out[name] - out['default']:+.1f} MB)" if name != "default" and "default" in out else ""
        print(f"  serve with {name}: RSS {out[name]:.1f} MB{added}")
    return out


def main() -> int:
    env = {**os.environ, **PORTS, "SUMMON_RUN_DIR": str(RUN_DIR), "SUMMON_VENV": sys.prefix}
    up = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True)
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    serve: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    try:
        stack = dict(line.split("=", 1) for line in (RUN_DIR / "env").read_text().splitlines() if "=" in line)
        serve_env = {k: v for k, v in env.items() if not k.startswith(("SUMMON_PROVIDER", "AGENTS_LIVE"))}
        serve_env.update({"SUMMON_CONFIG": stack["SUMMON_CONFIG"], "SUMMON_AGENT_MOCK": "1",
                          "SUMMON_DATABASE_DSN": stack["SUMMON_DSN"]})
        log = (RUN_DIR / "serve.log").open("wb")
        serve = subprocess.Popen([sys.executable, "-m", "appservice", "serve"], cwd=REPO, env=serve_env,
                                 stdout=log, stderr=subprocess.STDOUT)
        worker = subprocess.Popen([sys.executable, "-m", "appservice", "worker"], cwd=REPO, env=serve_env,
                                  stdout=(RUN_DIR / "worker.log").open("wb"), stderr=subprocess.STDOUT)
        if "--features" in sys.argv:
            worker.terminate()
            serve.terminate()
            serve.wait(15)
            worker.wait(15)
            rss = feature_rss(serve_env, Path(stack["SUMMON_CONFIG"]))
            # Figures, not targets: the 80 MB is the default config's.
            write("idle_features", [], {"rss_mb": {n: round(mb, 1) for n, mb in rss.items()},
                                        "added_mb": {n: round(mb - rss.get("default", mb), 1) for n, mb in rss.items()}})
            return 0
        time.sleep(SETTLE_SECONDS)
        if serve.poll() is not None or worker.poll() is not None:
            print((RUN_DIR / "serve.log").read_text(), (RUN_DIR / "worker.log").read_text(), file=sys.stderr)
            return 1
        pg = postgres_pids()
        before, w_before, pg_before = cpu_seconds(serve.pid), cpu_seconds(worker.pid), total(pg)
        time.sleep(IDLE_SECONDS)
        after, w_after, pg_after = cpu_seconds(serve.pid), cpu_seconds(worker.pid), total(postgres_pids())
        serve_rss, worker_rss = rss_mb(serve.pid), rss_mb(worker.pid)
        print(f"idle {IDLE_SECONDS:.0f}s: summon serve used {after - before:.2f} CPU s "
              f"({(after - before) / IDLE_SECONDS * 1000:.1f} ms/s), summon worker {w_after - w_before:.2f} CPU s; "
              f"PostgreSQL {pg_after - pg_before:.2f} CPU s; RSS serve {serve_rss:.0f} MB, worker {worker_rss:.0f} MB")
        write("idle", [
            Ratio(f"serve CPU s over {IDLE_SECONDS:.0f} idle s", after - before, None, "CPU s", 0.3),
            Ratio(f"worker CPU s over {IDLE_SECONDS:.0f} idle s", w_after - w_before, None, "CPU s", 0.3),
            Ratio("serve RSS", serve_rss, None, "MB", 80),
            Ratio("worker RSS", worker_rss, None, "MB", 80),
        ], {"postgres_cpu_s": pg_after - pg_before})
        return 0
    finally:
        for proc in (serve, worker):
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, check=False)


if __name__ == "__main__":
    sys.exit(main())
