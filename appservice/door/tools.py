"""The door's own built-in: ``current_room``, offered on the voice surface only (``engine.tools.base``).

"Which room are you in?" is answered from the session's binding at the moment it is asked, never from what
the model remembers: the room changes while people talk, a notice of the change can be missed, and an earlier
room still in the conversation can outweigh it."""

from __future__ import annotations

import json
from typing import Any

from appservice.door.tables import DoorTables
from engine.errors import ToolError
from engine.store import Families
from engine.tools.base import RunRef, ToolFn


def make_current_room(db: Families) -> ToolFn:
    async def current_room(run: RunRef, arguments: dict[str, Any]) -> str:
        session = await db.of(DoorTables).binding_of_run(run.id)
        if session is None:
            raise ToolError("This is not a spoken conversation through the door, so it is in no room to tell.")
        answer: dict[str, Any] = {"with": session.person}
        if session.room_id is not None:
            answer["room"] = {"id": session.room_id, "name": session.room_name}
            answer["note"] = "You and they are both in this room; others in it may read what is posted there."
        else:
            answer["room"] = None
            answer["note"] = "No room: a conversation between the two of you alone (their direct messages with you)."
        if session.pending_room is not None:
            answer["being_checked"] = session.pending_room
        return json.dumps(answer, ensure_ascii=False)

    return current_room
