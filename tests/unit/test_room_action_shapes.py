"""A remembered room action reads back as what was remembered; what this version cannot read is None."""

from __future__ import annotations

import dataclasses

import pytest

from appservice.matrix.inbound.followups import Decline, InvitePuppet, Join, LeaveEncrypted, PuppetLeaves
from appservice.matrix.rooms import followup_of

ROOM, PUPPET = "!r:example.org", "@bot_helper:example.org"


@pytest.mark.parametrize("followup", [
    Join(ROOM, PUPPET), Decline(ROOM, PUPPET, "encrypted"), LeaveEncrypted(ROOM),
    InvitePuppet(ROOM, PUPPET, "@summon:example.org"), PuppetLeaves(ROOM, PUPPET, "removed with !bots"),
], ids=lambda f: type(f).__name__)
def test_each_kind_reads_back(followup: object) -> None:
    assert dataclasses.is_dataclass(followup) and not isinstance(followup, type)
    assert followup_of({"kind": type(followup).__name__, **dataclasses.asdict(followup)}) == followup


@pytest.mark.parametrize("action", [
    None, "Join", {"kind": "Teleport", "room_id": ROOM}, {"kind": "Join", "room_id": ROOM},
    {"kind": "Join", "room_id": ROOM, "user_id": PUPPET, "extra": 1},
])
def test_what_cannot_be_read_is_none(action: object) -> None:
    assert followup_of(action) is None
