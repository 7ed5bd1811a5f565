"""The only place that runs SQL: the pool, the named statements, one module of typed functions per table
family, and a typed transaction handle (``Store``, ``Tx``). Rows come back as frozen dataclasses; the
database's exceptions come back as the error tree's (``engine.errors``)."""

from engine.store.migrate import migrate
from engine.store.store import Families, Store, Tx

__all__ = ["Families", "Store", "Tx", "migrate"]
