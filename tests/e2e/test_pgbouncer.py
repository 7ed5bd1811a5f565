"""summon behind PgBouncer in transaction mode, as real deployments run it: `summon serve` (taking the
homeserver's transactions, with no worker slots of its own) and two `summon worker` processes, every pooled
connection through PgBouncer, LISTEN and migrations direct — and mentions get answered."""

from __future__ import annotations

import subprocess
from pathlib import Path

import asyncpg
import yaml

from tests.e2e.support import REPO, Person, Summon, free_port, own_stack

MENTIONS = 6


def config(stack: dict[str, str], bouncer: str, where: Path, *, slots: int) -> Path:
    data = yaml.safe_load(Path(stack["SUMMON_CONFIG"]).read_text())
    direct = data["database"]["dsn"]
    data["database"] = {"dsn": f"{bouncer}/summon", "pooled": True, "direct_dsn": direct, "pool_min": 1,
                        "pool_max": 4}
    data["worker"] = {"slots": slots, "poll_seconds": 30}  # woken by LISTEN (direct), not by polling
    where.write_text(yaml.safe_dump(data))
    return where


async def test_serve_and_two_workers_through_pgbouncer_answer(tmp_path: Path) -> None:
    with own_stack("pgbouncer") as stack:
        port = free_port()
        env = {**stack, "SUMMON_PGBOUNCER_PORT": str(port), "SUMMON_AGENT_MOCK": "1"}
        started = subprocess.run([str(REPO / "synapse-dev" / "pgbouncer")], env=env, capture_output=True, text=True,
                                 timeout=300)
        assert started.returncode == 0, started.stderr
        bouncer = started.stdout.strip().splitlines()[-1]
        serve_config = config(stack, bouncer, tmp_path / "serve.yaml", slots=0)
        worker_config = config(stack, bouncer, tmp_path / "worker.yaml", slots=2)
        serve = Summon(["-c", str(serve_config), "serve"], env, tmp_path / "serve.log")
        workers = [Summon(["-c", str(worker_config), "worker"], env, tmp_path / f"worker{n}.log") for n in (1, 2)]
        people: list[Person] = []
        try:
            await serve.wait_for("appservice listening")
            # One line from each of several people, each in a room of their own with the bot: a person's second
            # line while their first run is live would join that run (by design), not start another.
            puppet = f"@bot_helper:{stack['SUMMON_SERVER_NAME']}"
            rooms = []
            for n in range(MENTIONS):
                people.append(await Person.register(stack["SUMMON_HS_URL"], f"person{n}"))
                rooms.append(await people[-1].room_with(puppet))
            asked = [await person.say(room, f"Helper, hello number {n}")
                     for n, (person, room) in enumerate(zip(people, rooms, strict=True))]
            answers = {}
            for person, room, line in zip(people, rooms, asked, strict=True):
                answers.update(await person.answers(room, [line], timeout=90))
            assert len(answers) == MENTIONS, (answers, serve.output()[-2000:], workers[0].output()[-2000:])
            # Only the workers worked (serve has no slots), and PgBouncer carried the pooled transactions.
            direct = await asyncpg.connect(stack["SUMMON_DSN"])
            try:
                by = await direct.fetch("SELECT DISTINCT worker FROM agent_steps")
                done = await direct.fetchval("SELECT count(*) FROM agent_runs WHERE status = 'done'")
            finally:
                await direct.close()
            assert done == MENTIONS
            assert by and all(":" in r["worker"] for r in by)
            stats = subprocess.run(["psql", "-X", "-A", "-t", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                                    "pgbouncer", "-c", "SHOW STATS"], capture_output=True, text=True, timeout=30)
            assert stats.returncode == 0, stats.stderr
            summon_row = next(line for line in stats.stdout.splitlines() if line.startswith("summon|"))
            assert int(summon_row.split("|")[1]) > MENTIONS * 3  # total_xact_count: every commit went through it
        finally:
            for person in people:
                await person.close()
            for proc in (serve, *workers):
                await proc.interrupt(timeout=20)
        for proc in (serve, *workers):
            assert "Traceback" not in proc.output(), proc.output()[-3000:]
