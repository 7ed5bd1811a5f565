"""The site's people (SPEC §8) and what they spend (``sql/queries/people.sql``): ceilings and the ledger,
what a personal tool asks, and the audience reader.

The personal statements name nobody: whom they answer for is set by ``agent_become_v1`` from the run and
read by row security, in a transaction that has taken the tools role (``as_tools``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.core.limits import Caps, Spent
from engine.store.base import Family, row


@dataclass(frozen=True, slots=True)
class Subject:
    """Whom a run is about, as ``agent_subject_v1`` resolves it from the run row alone: an account, a desk
    contact (either or both None), and whether that is who asked the run."""

    user_id: str | None
    contact_id: int | None
    is_asker: bool


class People(Family):
    __slots__ = ()

    # --- ceilings ------------------------------------------------------------------------------------

    async def lock_spender(self, who: str) -> datetime:
        """Take the person's row for the rest of the transaction (their summonses are checked one at a
        time); the database's now."""
        await self._run("ensure_spender", who)
        now: datetime = await self._value("lock_spender", who)
        return now

    async def ledger(self, who: str, bot: str) -> list[Spent]:
        """What ``who`` spent on ``bot`` in the last 30 days, reservations included."""
        return [Spent(r["at"], r["usd"]) for r in await self._all("spender_ledger", who, bot)]

    async def reserve(self, who: str | None, bot: str, run_id: int, usd: float) -> None:
        """Hold the run's own spend limit against ``who``'s ceilings (None: nobody's) and the deployment's
        daily cap until the run ends and is settled."""
        await self._run("reserve_spend", who, bot, run_id, usd)

    async def draw(self, run_id: int, usd: float) -> None:
        """Run ``run_id`` is about to make a call that may cost at most ``usd``: drawn from its reservation."""
        await self._run("draw_spend", run_id, usd)

    async def spend(self, run_id: int, usd: float) -> None:
        """Run ``run_id``'s call cost ``usd``: its draw settled to that."""
        await self._run("spend_call", run_id, usd)

    # --- the deployment's caps -----------------------------------------------------------------------

    async def caps(self) -> Caps:
        return row(Caps, await self._one("deployment_caps"))

    async def set_caps(self, caps: Caps) -> None:
        await self._run("set_deployment_caps", caps.daily_spend, caps.live_runs_per_person, caps.waiting_per_bot)

    async def lock_deployment(self) -> datetime:
        """Take the deployment's caps row for the rest of the transaction; the database's now."""
        now: datetime = await self._value("lock_deployment_spend")
        return now

    async def deployment_spent(self) -> float:
        """What the whole deployment spent in the last 24 hours, reservations included."""
        return float(await self._value("deployment_spent"))

    async def deployment_ledger(self) -> list[Spent]:
        return [Spent(r["at"], r["usd"]) for r in await self._all("deployment_ledger")]

    async def settle(self, run_id: int) -> None:
        """A run ended: its reservation becomes what it really cost."""
        await self._run("settle_spend", run_id)

    # --- personal tools (in a transaction of their own) -----------------------------------------------

    async def as_tools(self) -> None:
        """Act as the tools role for the rest of the transaction: it owns nothing, row security applies."""
        await self._run("personal_as_tools")

    async def as_engine(self) -> None:
        await self._run("personal_as_engine")

    async def become(self, run_id: int) -> bool:
        """Answer for run ``run_id``'s subject for the rest of the transaction; True when there is one."""
        return bool(await self._value("personal_become", run_id))

    async def about_me(self) -> dict[str, Any] | None:
        facts = await self._value("personal_about_me")
        return facts if isinstance(facts, dict) else None

    async def raise_ticket(self, run_id: int, subject: str, body: str) -> dict[str, Any] | None:
        """The ticket raised for the run's subject, declared as the bot's own; None when there is nobody."""
        ticket = await self._value("personal_raise_ticket", run_id, subject, body)
        return ticket if isinstance(ticket, dict) else None

    # --- whom a run is about (the engine's, never a tool's to ask with a person in hand) ---------------

    async def subject(self, run_id: int) -> Subject | None:
        """Whom run ``run_id`` is about, resolved in SQL from the run row (None: no such run, or it is over)."""
        found = await self._one("run_subject", run_id)
        if found is None:
            return None
        return Subject(found["user_id"], found["contact_id"], bool(found["is_asker"]))

    # --- the audience reader -------------------------------------------------------------------------

    async def site_classes(self, user_id: str) -> frozenset[str]:
        """The audience classes the site's people tables give an account."""
        return frozenset(await self._value("site_classes", user_id) or ())

    # --- pools of spend with a daily cap of their own (a surface's own: one inbox, say) ----------------

    async def lock_pool(self, pool: str) -> datetime:
        """Take the pool's row for the rest of the transaction; the database's now."""
        await self._run("ensure_spend_pool", pool)
        now: datetime = await self._value("lock_spend_pool", pool)
        return now

    async def pool_spent(self, pool: str) -> float:
        """What the pool spent in the last 24 hours, reservations included."""
        return float(await self._value("pool_spent", pool))

    async def pool_ledger(self, pool: str) -> list[Spent]:
        return [Spent(r["at"], r["usd"]) for r in await self._all("pool_ledger", pool)]

    async def reserve_in_pool(self, run_id: int, pool: str) -> None:
        """Count run ``run_id``'s reservation (and, once settled, its cost) in ``pool`` too."""
        await self._run("ensure_spend_pool", pool)
        await self._run("reserve_in_pool", run_id, pool)
