"""Several hosts, one PostgreSQL: the stack split across network namespaces of this test's own, joined by veth
pairs with addresses only inside them (10.77.<n>.0/30), so a partition or added latency hits one worker's link to
the database and nothing else on the machine.

    <prefix>c   PostgreSQL, Synapse, PgBouncer, `summon serve`, the people (this driver runs here)
    <prefix>w1  `summon worker` + its model (the fake provider, as a process of its own)   10.77.1.2 <-> 10.77.1.1
    <prefix>w2  the same                                                                  10.77.2.2 <-> 10.77.2.1

Phases, each with mentions sent by people through Synapse and answers read as they see them:

1. latency: the workers' links to the core delayed by 0, 20 and 50 ms a round trip; a mention's p50 at each, and
   from the growth, how many round trips over the workers' link a mention costs (p50 growth / added delay);
2. PgBouncer in transaction mode: serve and workers pooled through it (across the namespaces, LISTEN direct),
   every mention answered, p50 beside the direct figure;
3. partition: with runs in flight on w1, its link held (nothing passes either way: no reset, no error; what was
   sent arrives once the link is back, as after a real partition) for three leases; w2 must finish w1's runs after the lease, each answered exactly once, and w1, when its
   link returns, must not write a step to a run it lost (fencing) — checked in the steps' rows.

The delay and the partition are made by a relay at the core's end of each link (``LinkRelay``, tests/chaos/
proxies.py) for the link's database, PgBouncer and homeserver traffic: the machine this was built on runs a kernel
without ``sch_netem`` (nor any tc classifier), so ``tc netem`` cannot be used there.

Run: ``python -m tests.chaos.hosts`` as root (`make chaos` runs it). Exit 1 when a check fails. Namespaces are
named ``sc29<pid>…`` and always deleted at the end, every process in them killed first (they are all ours).
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import yaml

from tests.chaos.people import Mention, People, registration
from tests.chaos.proxies import LinkRelay
from tests.faults.support import REPO

RUN = REPO / ".dev" / "chaos-hosts-run"
WORK = REPO / ".dev" / "chaos-hosts"
PG, HS, PEOPLE, BOUNCER, MODEL = 56020, 8320, 29722, 29721, 29723
LEASE, SWEEP = 6.0, 1.0
PYTHON = sys.executable


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=120, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done


# --- outside: the namespaces -------------------------------------------------------------------------


def names(prefix: str) -> dict[str, str]:
    return {"core": f"{prefix}c", "w1": f"{prefix}w1", "w2": f"{prefix}w2"}


def make_namespaces(prefix: str) -> None:
    ns = names(prefix)
    for n in ns.values():
        sh("ip", "netns", "add", n)
        sh("ip", "-n", n, "link", "set", "lo", "up")
    for i in (1, 2):
        core, worker = f"{prefix}c{i}", f"{prefix}v{i}"
        # Made inside the core namespace with its peer inside the worker's: no interface ever on the host.
        sh("ip", "-n", ns["core"], "link", "add", core, "type", "veth", "peer", "name", worker, "netns", ns[f"w{i}"])
        sh("ip", "-n", ns["core"], "addr", "add", f"10.77.{i}.1/30", "dev", core)
        sh("ip", "-n", ns[f"w{i}"], "addr", "add", f"10.77.{i}.2/30", "dev", worker)
        sh("ip", "-n", ns["core"], "link", "set", core, "up")
        sh("ip", "-n", ns[f"w{i}"], "link", "set", worker, "up")


def remove_namespaces(prefix: str) -> None:
    for n in names(prefix).values():
        pids = sh("ip", "netns", "pids", n, check=False).stdout.split()
        for pid in pids:  # every process in a namespace this test made is this test's
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", n, check=False)


def outside() -> int:
    for tool in ("ip",):
        if shutil.which(tool) is None:
            print(f"hosts: `{tool}` is not installed (Debian: apt-get install iproute2)", file=sys.stderr)
            return 2
    if os.getuid() != 0:
        print("hosts: network namespaces need root", file=sys.stderr)
        return 2
    prefix = f"sc29{os.getpid() % 100000}"
    try:
        make_namespaces(prefix)
        inner = subprocess.run(["ip", "netns", "exec", names(prefix)["core"], PYTHON, "-m", "tests.chaos.hosts",
                                "--inside", prefix], cwd=REPO, check=False)
        return inner.returncode
    finally:
        # synapse-dev/down by PID first (it runs in the core namespace), then whatever is left, then the namespaces.
        subprocess.run(["ip", "netns", "exec", names(prefix)["core"], str(REPO / "synapse-dev" / "down")],
                       env={**os.environ, "SUMMON_RUN_DIR": str(RUN)}, check=False, timeout=120)
        remove_namespaces(prefix)


# --- inside the core namespace: the test --------------------------------------------------------------


class Hosts:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.ns = names(prefix)
        self.env: dict[str, str] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Any] = {}
        self.started: dict[str, int] = {}
        self.people: People | None = None
        self.admin: asyncpg.Pool | None = None
        # Per worker link: the relays for PostgreSQL, PgBouncer and Synapse at the core's end (ports + i).
        self.links = {i: [LinkRelay(f"10.77.{i}.1", base + i, up) for base, up in
                          ((56030, PG), (56040, BOUNCER), (8330, HS))] for i in (1, 2)}

    def stack_env(self) -> dict[str, str]:
        return {**os.environ, "SUMMON_RUN_DIR": str(RUN), "SUMMON_PG_PORT": str(PG), "SUMMON_HS_PORT": str(HS),
                "SUMMON_AS_PORT": "29720", "SUMMON_PG_LISTEN": "*", "SUMMON_PG_TRUST_NET": "10.77.0.0/16",
                "SUMMON_HS_BIND": "0.0.0.0", "SUMMON_EXTRA_REGISTRATIONS": str(WORK / "people.yaml")}

    async def up(self) -> None:
        shutil.rmtree(WORK, ignore_errors=True)
        WORK.mkdir(parents=True, exist_ok=True)
        tokens = registration(WORK / "people.yaml", port=PEOPLE, server_name="localhost")
        done = subprocess.run([str(REPO / "synapse-dev" / "up")], env=self.stack_env(), capture_output=True,
                              text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"synapse-dev/up: {done.stderr}")
        self.env = dict(line.split("=", 1) for line in (RUN / "env").read_text().splitlines() if "=" in line)
        bouncer = subprocess.run([str(REPO / "synapse-dev" / "pgbouncer")], capture_output=True, text=True,
                                 env={**self.stack_env(), "SUMMON_PGBOUNCER_PORT": str(BOUNCER),
                                      "SUMMON_PGBOUNCER_LISTEN": "0.0.0.0"}, timeout=300, check=False)
        if bouncer.returncode != 0:
            raise RuntimeError(f"synapse-dev/pgbouncer: {bouncer.stderr}")
        for relays in self.links.values():
            for relay in relays:
                await relay.start()
        self.admin = await asyncpg.create_pool(self.env["SUMMON_DSN"], min_size=1, max_size=2,
                                               server_settings={"application_name": "chaos-harness"})
        self.people = People(hs_url=self.env["SUMMON_HS_URL"], tokens=tokens, port=PEOPLE, server_name="localhost",
                             puppet="@bot_helper:localhost")
        await self.people.start()
        for i in (1, 2):
            self.spawn(f"model{i}", ["ip", "netns", "exec", self.ns[f"w{i}"], PYTHON, "-m", "tests.chaos.provider",
                                     "--host", f"10.77.{i}.2", "--port", str(MODEL), "--first", "0.2", "--second", "0.2", "--jitter", "0"])
        await self.start_summon(pooled=False)

    def log(self, name: str) -> Path:
        return WORK / f"{name}.{self.started.get(name, 0)}.log"

    def spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self.started[name] = self.started.get(name, 0) + 1  # a log of its own for every start
        self.logs[name] = self.log(name).open("wb")
        self.procs[name] = subprocess.Popen(cmd, cwd=REPO, env=env or dict(os.environ), stdout=self.logs[name],
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def config(self, name: str, *, host: str, slots: int | None, pooled: bool) -> Path:
        data: dict[str, Any] = yaml.safe_load((RUN / "summon.yaml").read_text())
        i = int(host.split(".")[2]) if host.startswith("10.77.") else 0  # a worker's link: through its relays
        direct = f"postgresql://postgres@{host}:{56030 + i if i else PG}/summon"
        data["homeserver"]["url"] = f"http://{host}:{8330 + i if i else HS}"
        data["database"] = {"dsn": f"postgresql://postgres@{host}:{56040 + i if i else BOUNCER}/summon", "pooled": True,
                            "direct_dsn": direct} if pooled else {"dsn": direct}
        data["worker"] = {"lease_seconds": LEASE, "sweep_seconds": SWEEP, **({"slots": slots} if slots is not None
                                                                              else {})}
        path = WORK / name
        path.write_text(yaml.safe_dump(data))
        return path

    def model_env(self, i: int = 1) -> dict[str, str]:
        """Worker ``i``'s model: the fake provider in its own namespace (on its own veth address, so the driver
        can reach it too, not through the link's relay)."""
        return {**os.environ, "SUMMON_PROVIDERS": "primary", "AGENTS_LIVE": "1",
                "SUMMON_PROVIDER_PRIMARY_KIND": "openai", "SUMMON_PROVIDER_PRIMARY_URL": f"http://10.77.{i}.2:{MODEL}/v1",
                "SUMMON_PROVIDER_PRIMARY_KEY": "sk-hosts", "SUMMON_PROVIDER_PRIMARY_MODEL": "gpt-test",
                "SUMMON_PROVIDER_PRIMARY_FREE": "1", "SUMMON_PROVIDER_PRIMARY_TIMEOUT": "60"}

    async def start_summon(self, *, pooled: bool) -> None:
        for name in ("w1", "w2", "serve"):
            self.stop(name)
        serve = self.config("serve.yaml", host="127.0.0.1", slots=0, pooled=pooled)
        self.spawn("serve", [PYTHON, "-m", "appservice", "-c", str(serve), "serve"], self.model_env())
        await self.wait_log("serve", "appservice listening")
        for i in (1, 2):
            cfg = self.config(f"w{i}.yaml", host=f"10.77.{i}.1", slots=None, pooled=pooled)
            self.spawn(f"w{i}", ["ip", "netns", "exec", self.ns[f"w{i}"], PYTHON, "-m", "appservice", "-c", str(cfg),
                                 "worker"], self.model_env(i))
        for i in (1, 2):
            await self.wait_alive(f"w{i}")

    async def wait_log(self, name: str, text: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log(name).read_text(errors="replace"):
            if self.procs[name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name}: no {text!r}:\n{self.log(name).read_text(errors='replace')[-3000:]}")
            await asyncio.sleep(0.2)

    async def wait_alive(self, name: str, timeout: float = 120) -> None:
        """Until the worker process has said it is alive (its heartbeat row, by its pid)."""
        assert self.admin is not None
        pid = self.procs[name].pid
        deadline = time.monotonic() + timeout
        while not await self.admin.fetchval("SELECT count(*) FROM provider_status WHERE worker LIKE $1",
                                            f"%:{pid}:%"):
            if self.procs[name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} never beat:\n{self.log(name).read_text(errors='replace')[-3000:]}")
            await asyncio.sleep(0.2)

    def delay(self, i: int, ms: float) -> None:
        """Worker ``i``'s link: ``ms`` more a round trip (half each way)."""
        for relay in self.links[i]:
            relay.delay = ms / 2000

    def partition(self, i: int, cut: bool) -> None:
        for relay in self.links[i]:
            if cut:
                relay.held.set()
            else:
                relay.held.clear()

    async def mentions(self, n: int, gap: float, timeout: float = 120) -> list[Mention]:
        """``n`` mentions, ``gap`` seconds apart, each by someone free; once all are answered (or ``timeout``)."""
        assert self.people is not None
        sent: list[Mention] = []
        tasks = []
        for k in range(n):
            person = self.people.free()[0]
            tasks.append(asyncio.ensure_future(self.people.mention(person, k)))
            await asyncio.sleep(gap)
        sent = [m for m in await asyncio.gather(*tasks) if m is not None]
        deadline = time.monotonic() + timeout
        while not all(m.answers for m in sent) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        return sent

    async def control(self, first: float, second: float) -> None:
        async with aiohttp.ClientSession() as http:
            for i in (1, 2):
                async with http.post(f"http://10.77.{i}.2:{MODEL}/control",
                                     json={"first": first, "second": second}) as resp:
                    assert resp.status == 200, await resp.text()

    async def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        if self.people is not None:
            await self.people.close()
        if self.admin is not None:
            await self.admin.close()
        for f in self.logs.values():
            f.close()
        for relays in self.links.values():
            for relay in relays:
                await relay.close()


def p50(ms: list[Mention]) -> float:
    return statistics.median(m.latency for m in ms if m.latency is not None)


async def latency_phase(h: Hosts, label: str, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for delay in (0, 20, 50):
        for i in (1, 2):
            h.delay(i, delay)
        await h.mentions(3, 0.5)  # the pools' connections made again at this delay
        got = await h.mentions(n, 1.0)
        answered = [m for m in got if m.answers]
        out[f"{delay}ms"] = {"mentions": len(got), "answered": len(answered),
                             "duplicated": sum(1 for m in got if len(m.answers) > 1),
                             "p50_s": round(p50(answered), 3) if answered else None}
        print(f"  {label}, +{delay} ms worker ↔ core: {len(answered)}/{len(got)} answered, p50 "
              f"{out[f'{delay}ms']['p50_s']} s", flush=True)
    for i in (1, 2):
        h.delay(i, 0)
    base = out["0ms"]["p50_s"]
    for delay in (20, 50):
        got = out[f"{delay}ms"]["p50_s"]
        out[f"{delay}ms"]["round_trips"] = round((got - base) / (delay / 1000), 1) if got and base else None
    return out


async def partition_phase(h: Hosts) -> dict[str, Any]:
    assert h.admin is not None and h.people is not None
    await h.control(2.0, 2.0)  # runs take ~4 s: some are in flight on w1 when its link goes
    w1 = h.procs["w1"].pid
    people = h.people.free()[:12]
    tasks = [asyncio.ensure_future(h.people.mention(p, 1000 + k)) for k, p in enumerate(people)]
    deadline = time.monotonic() + 30
    held: list[int] = []
    while not held and time.monotonic() < deadline:
        held = [r["id"] for r in await h.admin.fetch(
            "SELECT id FROM agent_runs WHERE status = 'running' AND lease_owner LIKE $1", f"%:{w1}:%")]
        await asyncio.sleep(0.1)
    assert held, "w1 never held a run"
    cut = await h.admin.fetchval("SELECT clock_timestamp()")
    h.partition(1, True)
    print(f"  partition: w1 (pid {w1}) cut off holding runs {held}", flush=True)
    await asyncio.sleep(LEASE * 3)
    h.partition(1, False)
    healed = await h.admin.fetchval("SELECT clock_timestamp()")
    print("  partition: healed", flush=True)
    sent = [m for m in await asyncio.gather(*tasks) if m is not None]
    deadline = time.monotonic() + 90
    while not all(m.answers for m in sent) and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    await asyncio.sleep(10)  # w1's late writes, if any, arrive now (TCP retransmits after the heal)
    ids = [r["id"] for r in await h.admin.fetch("SELECT id FROM agent_runs WHERE trigger_event = ANY($1)",
                                                 [m.event_id for m in sent])]
    steps = await h.admin.fetch(
        "SELECT run_id, seq, kind, worker, created_at FROM agent_steps WHERE run_id = ANY($1) ORDER BY run_id, seq",
        ids)
    by_run: dict[int, list[Any]] = {}
    for s in steps:
        by_run.setdefault(s["run_id"], []).append(s)
    # Fencing: in a run w1 lost, no step of w1's after the first step of another worker's.
    late = []
    for rid in held:
        rows = by_run.get(rid, [])
        others = [s["seq"] for s in rows if f":{w1}:" not in s["worker"]]
        if others:
            late += [(rid, s["seq"], s["kind"]) for s in rows if f":{w1}:" in s["worker"] and s["seq"] > min(others)]
    finished_by_other = [rid for rid in held if by_run.get(rid) and f":{w1}:" not in by_run[rid][-1]["worker"]]
    status = {r["status"]: r["n"] for r in await h.admin.fetch(
        "SELECT status, count(*) AS n FROM agent_runs WHERE id = ANY($1) GROUP BY 1", ids)}
    answers = await h.admin.fetchval(
        "SELECT count(*) FROM outbox WHERE run_id = ANY($1) AND txn_id LIKE '%.answer'", ids)
    w1_log = h.log("w1").read_text(errors="replace")
    w1_fenced = w1_log.count("stopping work on it")
    result = {"mentions": len(sent), "answered": sum(1 for m in sent if m.answers),
              "answered_twice": sum(1 for m in sent if len(m.answers) > 1), "runs": len(ids), "status": status,
              "outbox_answers": answers, "held_by_w1_at_cut": held, "finished_by_the_other": finished_by_other,
              "w1_steps_after_takeover": late, "w1_fenced_writes_logged": w1_fenced,
              "partition_s": round((healed - cut).total_seconds(), 1), "w1_alive_after": h.procs["w1"].poll() is None}
    await h.control(0.2, 0.2)
    return result


async def inside(prefix: str) -> int:
    h = Hosts(prefix)
    began = time.time()
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    out: dict[str, Any] = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.node(),
                           "cores": os.cpu_count(), "uptime_before": load, "lease_s": LEASE}
    n = int(os.environ.get("CHAOS_HOSTS_MENTIONS", 15))
    try:
        await h.up()
        assert h.people is not None
        await h.people.gather(4, 10)
        print(f"hosts: core + 2 worker namespaces ({prefix}*); {load}", flush=True)
        out["direct"] = await latency_phase(h, "direct", n)
        out["partition"] = await partition_phase(h)
        print(f"  partition: {json.dumps(out['partition'])}", flush=True)
        await h.start_summon(pooled=True)
        out["pgbouncer"] = await latency_phase(h, "through PgBouncer (transaction mode)", n)
    finally:
        await h.close()
    out["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    out["minutes"] = round((time.time() - began) / 60, 1)
    (WORK / "hosts.json").write_text(json.dumps(out, indent=1, default=str))
    part = out["partition"]
    failures = []
    if part["answered"] != part["mentions"] or part["answered_twice"] or part["outbox_answers"] != part["runs"]:
        failures.append("partition: not every mention answered exactly once")
    if part["w1_steps_after_takeover"]:
        failures.append(f"partition: w1 wrote steps to runs it had lost: {part['w1_steps_after_takeover']}")
    if not part["finished_by_the_other"]:
        failures.append("partition: no run of w1's was finished by w2 (the partition proved nothing)")
    for phase in ("direct", "pgbouncer"):
        for delay, fig in out[phase].items():
            if fig["answered"] != fig["mentions"] or fig["duplicated"]:
                failures.append(f"{phase} +{delay}: {fig}")
    print(f"hosts: figures in {WORK / 'hosts.json'}")
    for f in failures:
        print("FAILED " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--inside":
        sys.exit(asyncio.run(inside(sys.argv[2])))
    sys.exit(outside())
