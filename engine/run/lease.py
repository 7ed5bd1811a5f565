"""Keeping a run's lease while long work runs that writes no step (SPEC §15: long work keeps its lease).

A held run's lease is extended by every fenced write (``engine/run/hold.py``); a tool writes none while it runs,
and may run longer than the lease (``create_bot`` waits up to minutes for its dry run). Without more, the sweep
would hand the run to another worker mid-call, which tells the model the call was interrupted — and the model
calls it again while the first call finishes. So the work runs in a task of its own while the holder renews the
lease every third of it, fenced (``WHERE id = $run AND lease_owner = $me``): a renewal that matches no row means
another worker holds the run now, and the work is cancelled there, before it does more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from engine.errors import LeaseLost, StoreError
from engine.store import Store
from engine.tasks import TaskGroup

log = logging.getLogger(__name__)

T = TypeVar("T")


async def kept(work: Coroutine[Any, Any, T], *, store: Store, run_id: int, owner: str, lease_seconds: float) -> T:
    """``work``'s outcome, the run's lease renewed every third of ``lease_seconds`` until it comes. A renewal
    that finds the run held by another cancels ``work`` and raises ``LeaseLost``; a renewal the database could
    not take is tried again at the next (the lease has two thirds left). Cancelled itself (a shutdown), it
    cancels ``work`` too."""
    async with TaskGroup(f"run {run_id} lease") as group:
        task = group.spawn(_carried(work), name=f"run-{run_id}-kept")
        while True:
            done, _ = await asyncio.wait({task}, timeout=lease_seconds / 3)
            if done:
                outcome: T | LeaseLost = task.result()
                if isinstance(outcome, LeaseLost):
                    raise outcome
                return outcome
            try:
                await store.runs.keep_lease(run_id, owner, lease_seconds)
            except LeaseLost:
                log.warning("run %s: its lease was lost while a tool ran; the tool is stopped", run_id,
                            extra={"run": run_id})
                raise
            except StoreError as exc:
                log.warning("run %s: could not renew its lease while a tool ran (%s)", run_id, exc,
                            extra={"run": run_id})


async def _carried(work: Coroutine[Any, Any, T]) -> T | LeaseLost:
    """``work``'s outcome, a lease found lost by the work itself (a fenced write of its own) handed back as a
    value (re-raised by ``kept``), so its task ends with an outcome rather than as a failure its group logs."""
    try:
        return await work
    except LeaseLost as exc:
        return exc
