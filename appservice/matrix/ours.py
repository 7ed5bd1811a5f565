"""Who is ours in a room: the service's own user and the bots' puppets (``@<prefix><slug>:<server>``, the prefix
``appservice.puppet_prefix``, ``bot_`` unless the deployment chose another)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.content import Registry

PUPPET_PREFIX = "bot_"  # the default of appservice.puppet_prefix


@dataclass(frozen=True, slots=True)
class Puppet:
    """A bot as a room sees it: its user id and the name people call it by."""
    user_id: str
    display_name: str


def in_our_namespace(user_id: str, *, server_name: str, service_user: str | None,
                     puppet_prefix: str = PUPPET_PREFIX) -> bool:
    """The service user, or any ``@<prefix>…`` user of our server (a puppet, published now or not)."""
    return user_id == service_user or (user_id.startswith(f"@{puppet_prefix}") and user_id.endswith(f":{server_name}"))


class Ours:
    def __init__(self, registry: Callable[[], Registry], *, server_name: str, service_user: str,
                 puppet_prefix: str = PUPPET_PREFIX) -> None:
        self._registry = registry
        self.server_name = server_name
        self.service_user = service_user
        self.puppet_prefix = puppet_prefix

    def __call__(self, user_id: str) -> bool:
        """The service user, or a puppet (published now or not: a withdrawn bot's puppet is still ours)."""
        return in_our_namespace(user_id, server_name=self.server_name, service_user=self.service_user,
                                puppet_prefix=self.puppet_prefix) or any(
            b.user_id == user_id for b in self._registry().bots.values())

    def registry(self) -> Registry:
        return self._registry()

    def puppets(self) -> list[Puppet]:
        return [Puppet(b.user_id, b.name) for b in self._registry().bots.values()]

    def offered_in_rooms(self, user_id: str) -> bool:
        return any(b.user_id == user_id and "rooms" in b.surfaces for b in self._registry().bots.values())
