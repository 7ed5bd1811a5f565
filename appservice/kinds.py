"""The surfaces this service runs, registered for the compile (``engine.content.kinds``) in the order an author
is told them: Matrix rooms first (where a bot with no ``surfaces:`` is), then the desk, the voice door, member
bots and bridged social rooms. Each surface's ``kind.py`` says what it brings."""

from __future__ import annotations

from appservice.desk.kind import DESK
from appservice.door.kind import DOOR
from appservice.matrix.kind import ROOMS
from appservice.members.kind import MEMBERS
from appservice.social.kind import SOCIAL
from engine.content.kinds import Kinds

KINDS = Kinds((ROOMS, DESK, DOOR, MEMBERS, SOCIAL))
