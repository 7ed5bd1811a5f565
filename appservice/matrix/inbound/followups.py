"""What must be said to the homeserver about membership, decided inside an appservice transaction and
carried out by ``rooms`` after the commit (remembered in ``room_actions`` until it is done)."""

from __future__ import annotations

from dataclasses import dataclass

FIRST_TRY_SECONDS = 60.0  # how long a remembered action's first attempt holds its row before another may
ATTEMPT_SECONDS = 45.0  # an attempt gives up before its hold (FIRST_TRY_SECONDS) runs out, so none runs twice


@dataclass(frozen=True)
class Join:
    """A puppet (or the service user) accepts an invite."""

    room_id: str
    user_id: str


@dataclass(frozen=True)
class Decline:
    """An invite refused, the reason on the leave event."""

    room_id: str
    user_id: str
    why: str  # a key of rooms.REASONS: "encrypted" | "not_offered" | "not_local" | "not_listed"


@dataclass(frozen=True)
class LeaveEncrypted:
    """A room turned encrypted: every one of ours leaves."""

    room_id: str


@dataclass(frozen=True)
class InvitePuppet:
    """`!bots add`: the service's user (``by``) invites a bot's puppet into the room."""

    room_id: str
    user_id: str
    by: str


@dataclass(frozen=True)
class PuppetLeaves:
    """`!bots remove`: a bot's puppet leaves the room, the reason on its leave event."""

    room_id: str
    user_id: str
    reason: str


@dataclass(frozen=True)
class Transcribe:
    """A voice note that summons ``bot``, held in the commit that stored it (every gate passed, its worst case
    reserved): fetched and heard after the commit (``voice.Hearing``) — once, however often this is carried out —
    then asked."""

    room_id: str
    event_id: str
    bot: str


Followup = Join | Decline | LeaveEncrypted | InvitePuppet | PuppetLeaves | Transcribe
KINDS: dict[str, type[Followup]] = {cls.__name__: cls for cls in (Join, Decline, LeaveEncrypted, InvitePuppet,
                                                                  PuppetLeaves, Transcribe)}
