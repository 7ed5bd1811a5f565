"""The tools a bot on the door hands to its asker's own front end (a bot file's ``client_tools:``,
``appservice.door.kind``): what the voice app itself does — end the call, open a page.

The bot's runs on the door are offered them (and only them among the tools a client names: whatever ``tools``
a request sends stays ignored). When the model calls one, the call is kept (``door_client_calls``) and told to
the response following the run (NOTIFY ``summon_door_calls``), which sends it to the client as a tool call —
``delta.tool_calls`` on chat completions, a ``function_call`` item on the Responses API — and ends. The run
waits, as for any tool, for the client's next request to bring the result (a ``tool`` message, a
``function_call_output`` item, by the call's id); that request's response follows the same run to its answer.
A client that never answers: after ``wait_seconds`` the model is told so, in words, and the run goes on.
"""

from __future__ import annotations

import logging
from typing import Any

from appservice.door.kind import client_tool_specs
from appservice.door.tables import DoorTables
from engine.clock import Clock
from engine.core.messages import ToolSpec
from engine.store import Store
from engine.tools.base import RunRef

log = logging.getLogger(__name__)

CALLS = "summon_door_calls"
WAIT_SECONDS = 60.0
# How often a waiting call looks for its answer (a client tool is called a few times a conversation at most).
LOOK_SECONDS = 0.1
NO_ANSWER = ("The person's app did not say what came of {name} (no answer came back); do not say it was done.")


class ClientTools:
    """``engine.tools.base.Handed`` for the door."""

    def __init__(self, store: Store, clock: Clock, *, wait_seconds: float = WAIT_SECONDS) -> None:
        self.store = store
        self.clock = clock
        self.wait_seconds = wait_seconds

    def specs(self, bot: object) -> tuple[ToolSpec, ...]:
        return client_tool_specs(bot)

    async def call(self, run: RunRef, call_id: str, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        tables = self.store.of(DoorTables)
        await tables.hand_call(run.id, call_id, name, arguments)
        log.info("run %s: client tool %s handed to the client (call %s)", run.id, name, call_id,
                 extra={"run": run.id, "bot": run.bot})
        started = self.clock.monotonic()
        while True:
            answer = await tables.call_answer(run.id, call_id)
            if answer is not None:
                log.info("run %s: the client answered call %s", run.id, call_id, extra={"run": run.id})
                return answer
            if self.clock.monotonic() - started >= self.wait_seconds:
                log.info("run %s: the client did not answer call %s of %s within %.0fs", run.id, call_id, name,
                         self.wait_seconds, extra={"run": run.id, "bot": run.bot})
                return NO_ANSWER.format(name=name), True
            await self.clock.sleep(LOOK_SECONDS)
