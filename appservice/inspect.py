"""``summon runs``: the operator's view of runs and their steps, straight from the rows."""

from __future__ import annotations

from appservice.matrix.voice_tables import VoiceTables
from engine.store import Store
from engine.store.runs import InspectedStep


def _step_line(step: InspectedStep) -> str:
    payload = step.payload or {}
    what = ""
    if step.kind == "model":
        what = f"error: {payload['error']}" if payload.get("error") else (
            "tools: " + ", ".join(c["name"] for c in payload.get("tool_calls", [])) if payload.get("tool_calls")
            else (payload.get("text") or "")[:60].replace("\n", " "))
        if payload.get("fallback"):
            what += " (fallback)"
    elif step.kind == "tool_call":
        what = payload.get("call", {}).get("name", "")
    elif step.kind == "tool_result":
        what = ("error: " if payload.get("is_error") else "") + (payload.get("content") or "")[:60]
    elif step.kind == "ending":
        what = payload.get("ending", "")
    elif step.kind == "undelivered":
        what = f"not delivered: {payload.get('reason', '')}"[:120]
    elif step.kind == "heard":
        what = (payload.get("text") or "")[:60].replace("\n", " ")
    elif step.kind == "model_started":
        what = f"may cost up to ${float(payload.get('estimate_usd') or 0):.6f}"
    took = f"{step.seconds * 1000:7.0f} ms" if step.seconds is not None else "       -"
    provider = f"{step.provider or ''}/{step.model or ''}".strip("/")
    return (f"  {step.seq:>3} {step.kind:<13} {took} {provider:<28} "
            f"in {step.tokens_in:>6} out {step.tokens_out:>6} ${step.cost_usd:.6f}  {what}")


async def runs_report(store: Store, *, run_id: int | None, room: str | None, bot: str | None,
                      limit: int) -> list[str]:
    """Runs (newest first) with their outcome and every step; then, unless one run was asked for, the
    latest refused summonses — a refusal starts no run, so it is a row of its own."""
    lines: list[str] = []
    for run in await store.runs.inspect(run_id, room, bot, limit):
        steps = await store.runs.inspect_steps(run.id)
        outcome = run.ending or ("answered" if run.status == "done" else run.status)
        lost = next((s for s in steps if s.kind == "undelivered"), None)
        if lost is not None:
            outcome = f"not delivered: {lost.payload.get('reason', '')}"
        lines.append(f"run {run.id} · {run.bot} · {run.status} ({outcome}) · asked by "
                     f"{run.asked_by or 'nobody'} in {run.place} · attempts {run.attempts} · "
                     f"created {run.created_at:%Y-%m-%d %H:%M:%S}")
        if run.reason:
            lines.append(f"  reason: {run.reason}")
        for step in steps:
            lines.append(_step_line(step))
        # Speech is paid for outside the run's steps (a voice note heard before the run was claimed, an answer
        # said after it ended): its calls are rows of their own, shown with the run they were for.
        for call in await store.of(VoiceTables).calls(run.id):
            units = f"{call.units:g} s heard" if call.kind == "transcription" else f"{call.units:g} characters said"
            lines.append(f"  speech {call.kind:<13} {units:<28} ${call.cost_usd:.6f}  at {call.at:%H:%M:%S}")
    if run_id is None:
        refused = await store.refusals.latest(room, bot, limit)
        if refused:
            lines.append("refused (no run was started):")
        for r in refused:
            detail = f" ({r.detail})" if r.detail else ""
            lines.append(f"  {r.created_at:%Y-%m-%d %H:%M:%S} · {r.bot} · {r.reason}{detail} · asked by "
                         f"{r.asked_by or 'nobody'} in {r.place or r.surface}")
    return lines
