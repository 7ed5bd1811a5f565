"""Opening the database as the config says: through a pooler or not, LISTEN and migrations direct."""

from __future__ import annotations

from appservice.config import Database
from appservice.matrix.places import ROOM_PLACES
from engine.clock import Clock
from engine.store import Store, migrate


async def open_store(db: Database, *, min_size: int | None = None, max_size: int | None = None,
                     clock: Clock | None = None) -> Store:
    """The store on ``db.dsn`` (prepared statements off when it is pooled), listening on the direct DSN; the runs'
    places are Matrix rooms (the desk's and the door's own places have no rules of their own)."""
    return await Store.connect(db.dsn, min_size=min_size or db.pool_min, max_size=max_size or db.pool_max,
                               clock=clock, pooled=db.pooled, listen_dsn=db.direct_dsn, places=ROOM_PLACES)


async def migrate_database(db: Database) -> list[str]:
    """Migrations hold a session lock while they run: always on a direct connection."""
    return await migrate(db.direct())
