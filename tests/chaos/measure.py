"""What each scenario is judged by, from what the people saw (each mention's answers, by the events' own
timestamps) and what the database holds (the runs and their steps):

- lost: a mention the homeserver took that never got an answer (by the end of the run's drain);
- answers duplicated: a mention answered more than once (two notices replying to it, each mentioning its asker);
- steps duplicated: a step row written twice for one (run, seq), or a tool call recorded twice in a run; beside
  it, the model calls re-made (a call a fault interrupted is closed at its estimate and made again — work redone,
  not a step duplicated);
- recovery: from the fault's start until the last mention slowed by it (answered later than twice the baseline
  p99, at least a second over it, or never) was answered — the backlog gone, every later mention answered at the
  baseline's pace, and so the throughput back to the offered rate;
- retained: answers that came during the fault (at least its first 10 s) over what the baseline rate would have
  brought in the same time;
- p99 mention → answer for the mentions answered before the fault, those sent during it (or in flight when it
  began), and those sent after it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from tests.chaos.people import Mention

MIN_FAULT_WINDOW = 10.0


@dataclass
class Window:
    name: str
    what: str
    baseline_start: float
    fault_start: float
    fault_end: float
    after_end: float
    notes: dict[str, Any]


@dataclass
class Result:
    scenario: str
    what: str
    fault_seconds: float
    mentions: int
    lost: int
    answers_duplicated: int
    steps_duplicated: int
    calls_redone: int
    ended_failed: int
    baseline_per_s: float
    retained_pct: float
    recovery_s: float | None
    p99_before_s: float | None
    p99_during_s: float | None
    p99_after_s: float | None
    notes: dict[str, Any]

    def json(self) -> dict[str, Any]:
        return asdict(self)


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def judge(w: Window, mentions: list[Mention], db: dict[str, int]) -> Result:
    ours = [m for m in mentions if w.baseline_start <= m.sent < w.after_end]
    # In flight when the fault began (sent before, answered after or never) counts as during: a crash hits those.
    before = [m for m in ours if m.sent < w.fault_start and m.answers and m.answers[0] < w.fault_start]
    during = [m for m in ours if w.fault_start <= m.sent <= w.fault_end
              or (m.sent < w.fault_start and not (m.answers and m.answers[0] < w.fault_start))]
    after = [m for m in ours if w.fault_end < m.sent]
    answers = sorted(a for m in mentions for a in m.answers[:1])
    span = max(1.0, w.fault_start - w.baseline_start)
    rate = sum(1 for a in answers if w.baseline_start + 3 <= a < w.fault_start + 3) / span
    lat_before = [m.latency for m in before if m.latency is not None]
    base = p99(lat_before) or 0.0
    slow = max(2 * base, base + 1.0)
    late = [m for m in during + after if m.latency is None or m.latency > slow]
    recovery: float | None
    if not late:
        recovery = 0.0
    elif any(m.latency is None for m in late):
        recovery = None
    else:
        recovery = max(m.answers[0] for m in late) - w.fault_start
    end = max(w.fault_end, w.fault_start + MIN_FAULT_WINDOW)
    got = sum(1 for a in answers if w.fault_start <= a < end)
    retained = 100.0 * got / (rate * (end - w.fault_start)) if rate else 0.0
    return Result(
        scenario=w.name, what=w.what, fault_seconds=round(w.fault_end - w.fault_start, 1), mentions=len(ours),
        lost=sum(1 for m in ours if not m.answers), answers_duplicated=sum(1 for m in ours if len(m.answers) > 1),
        steps_duplicated=db["steps_duplicated"], calls_redone=db["calls_redone"], ended_failed=db["ended_failed"],
        baseline_per_s=round(rate, 2), retained_pct=round(retained, 0),
        recovery_s=None if recovery is None else round(max(0.0, recovery), 1),
        p99_before_s=_r(base if lat_before else None),
        p99_during_s=_r(p99([m.latency for m in during if m.latency is not None])),
        p99_after_s=_r(p99([m.latency for m in after if m.latency is not None])), notes=w.notes)


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


DB_COUNTS = """
WITH ours AS (SELECT id, status FROM agent_runs WHERE trigger_event = ANY($1::text[]))
SELECT
  (SELECT count(*) FROM (SELECT s.run_id, s.seq FROM agent_steps s JOIN ours ON ours.id = s.run_id
                         GROUP BY 1, 2 HAVING count(*) > 1) d)
  + (SELECT count(*) FROM (SELECT s.run_id, s.payload->'call'->>'id' FROM agent_steps s JOIN ours ON ours.id = s.run_id
                           WHERE s.kind = 'tool_call' GROUP BY 1, 2 HAVING count(*) > 1) t) AS steps_duplicated,
  (SELECT count(*) FROM agent_steps s JOIN ours ON ours.id = s.run_id
    WHERE s.kind = 'model' AND coalesce((s.payload->>'interrupted')::boolean, false)) AS calls_redone,
  (SELECT count(*) FROM ours WHERE status <> 'done') AS ended_failed,
  (SELECT count(*) FROM ours) AS runs
"""


def table(results: list[Result]) -> str:
    head = ["scenario", "fault s", "mentions", "lost", "dup answers", "dup steps", "calls redone", "ended failed",
            "retained %", "recovery s", "p99 before", "p99 during", "p99 after"]
    rows = [[r.scenario, f"{r.fault_seconds:g}", str(r.mentions), str(r.lost), str(r.answers_duplicated),
             str(r.steps_duplicated), str(r.calls_redone), str(r.ended_failed), f"{r.retained_pct:.0f}",
             "never" if r.recovery_s is None else f"{r.recovery_s:g}", _s(r.p99_before_s), _s(r.p99_during_s),
             _s(r.p99_after_s)] for r in results]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _s(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f} s"
