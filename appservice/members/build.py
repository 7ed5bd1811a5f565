"""The member bots, built whole: their surface, and their ticks (``summon serve`` only)."""

from __future__ import annotations

from dataclasses import dataclass

from appservice.matrix.delivery.homeserver import Homeserver
from appservice.members.service import MemberBots
from appservice.parts import Parts, Shared
from engine.tools.quarantine import Quarantine


@dataclass(frozen=True)
class Members:
    bots: MemberBots
    parts: Parts


def build_members(shared: Shared, quarantine: Quarantine, *, homeserver: Homeserver) -> Members:
    c = shared.config
    assert c.members is not None
    bots = MemberBots(c.members, shared.store, shared.registry, homeserver, shared.clock, quarantine,
                      server_name=c.homeserver.server_name, service_user=shared.service_user,
                      puppet_prefix=c.appservice.puppet_prefix)
    return Members(bots=bots, parts=Parts(surface=bots.surface,
                                          background=(("member-bots-ticks", lambda: bots.run(shared.stop)),)))
