"""The social surface, built whole (docs/social.md): who is a guest (the config's bridges), the ``!rules`` commands,
the asking of a rule's bot, the review place, and the engine's ``Surface`` — handed to the rooms surface as one of
the surfaces that work in its rooms (``rooms``), and to the worker (``parts``)."""

from __future__ import annotations

from dataclasses import dataclass

from appservice.matrix.ours import Ours
from appservice.parts import Parts, Shared
from appservice.social.asking import SocialAsking
from appservice.social.bridged import Bridges
from appservice.social.commands import RulesCommands
from appservice.social.review import Review
from appservice.social.rooms import SocialRooms
from appservice.social.surface import SocialSurface


@dataclass(frozen=True)
class Social:
    rooms: SocialRooms
    surface: SocialSurface
    parts: Parts


def build_social(shared: Shared) -> Social:
    c = shared.config
    assert c.social is not None
    server = c.homeserver.server_name
    ours = Ours(shared.registry, server_name=server, service_user=shared.service_user,
                puppet_prefix=c.appservice.puppet_prefix)
    bridges = Bridges(c.social.bridges)
    review = Review(shared.registry, room_id=c.social.staff_room, service_user=shared.service_user,
                    level=c.social.power, server_name=server)
    asking = SocialAsking(c.social, shared.registry, bridges, review, server_name=server, ours=ours,
                          service_user=shared.service_user, max_attempts=c.worker.max_attempts)
    commands = RulesCommands(shared.registry, staff_room=c.social.staff_room, level=c.social.power,
                             server_name=server, service_user=shared.service_user)
    surface = SocialSurface(review, shared.registry, server_name=server)
    rooms = SocialRooms(bridges, commands, asking, review, ours)
    return Social(rooms=rooms, surface=surface, parts=Parts(surface=surface))
