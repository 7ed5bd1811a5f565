"""The process's logging: ``logging.format: text`` (a line a person reads, its fields at the end) or ``json``
(one object a line, for a log pipeline), every line about a run carrying its run, bot and room, and no
secret ever written.

Secrets are kept out twice over: nothing in summon logs a token, a key or a DSN's password on purpose, and
the one handler every line goes through replaces any of the deployment's secrets that still turns up (in a
library's debug line, an exception's text) with ``***`` before it is written.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TextIO, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel

from appservice.config import SECRET, Config
from engine.logfields import about

Format = Literal["text", "json"]

# What a line may be about, in the order a text line shows them.
FIELDS = ("run", "bot", "room", "worker", "txn", "event", "asker", "sender", "key")
# A LogRecord's own attributes: anything else on a record came from ``extra=``.
_OWN = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}
MASK = "***"
SHORTEST_SECRET = 6  # shorter values would mask ordinary words


class AboutRun(logging.Filter):
    """Lends a record the run its task is working on, where the call did not say."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in about().items():
            if getattr(record, key, None) is None:
                setattr(record, key, value)
        return True


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _OWN and not k.startswith("_") and v is not None}


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = _fields(record)
        shown = [f"{k}={fields[k]}" for k in FIELDS if k in fields]
        shown += [f"{k}={v}" for k, v in fields.items() if k not in FIELDS]
        if not shown:
            return line
        head, nl, rest = line.partition("\n")  # fields on the message's line, a traceback after
        return f"{head} [{' '.join(shown)}]{nl}{rest}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _fields(record).items():
            out.setdefault(key, value if isinstance(value, str | int | float | bool) else str(value))
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class Redacting(logging.Formatter):
    """Wraps a formatter: any secret in the finished line becomes ``***``."""

    def __init__(self, inner: logging.Formatter, secrets: Iterable[str]) -> None:
        super().__init__()
        self.inner = inner
        kept = sorted({s for s in secrets if len(s) >= SHORTEST_SECRET}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in kept)) if kept else None

    def format(self, record: logging.LogRecord) -> str:
        line = self.inner.format(record)
        return self._pattern.sub(MASK, line) if self._pattern is not None else line


def handler(fmt: Format, secrets: Iterable[str], stream: TextIO | None = None) -> logging.Handler:
    """The one handler a process writes through: its format, the run's fields, the secrets masked."""
    out = logging.StreamHandler(stream or sys.stderr)
    out.setFormatter(Redacting(JsonFormatter() if fmt == "json" else TextFormatter(), secrets))
    out.addFilter(AboutRun())
    return out


def configure(fmt: Format = "text", *, verbose: bool = False, secrets: Iterable[str] = ()) -> None:
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler(fmt, secrets))
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("mautrix").setLevel(logging.WARNING)


def _marked(annotation: Any) -> bool:
    return get_origin(annotation) is Annotated and any(m is SECRET for m in getattr(annotation, "__metadata__", ()))


def _inner(annotation: Any, at: int) -> Any:
    """The ``at``-th type argument of a container annotation (dict's value is 1, a list's item 0)."""
    args = get_args(annotation)
    return args[at] if len(args) > at else None


def secrets_in(model: BaseModel) -> list[str]:
    """Every value the config declares a secret (``appservice.config.Secret``), wherever it sits: a field, a
    dict's values, a list's items, a nested section."""
    found: list[str] = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        marked = any(m is SECRET for m in field.metadata)
        found += _secret_values(value, marked, field.annotation)
    return found


def _secret_values(value: Any, marked: bool, annotation: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if marked else []
    if isinstance(value, BaseModel):
        return secrets_in(value)
    if isinstance(value, Mapping):
        inner = _inner(annotation, 1)
        return [s for v in value.values() for s in _secret_values(v, _marked(inner), inner)]
    if isinstance(value, list | tuple):
        inner = _inner(annotation, 0)
        return [s for v in value for s in _secret_values(v, marked or _marked(inner), inner)]
    return []


def secrets_of(config: Config, env: Mapping[str, str]) -> list[str]:
    """Every secret this deployment holds: every setting the config declares a secret (tokens, signing secrets,
    staff and door keys, member bots' keys — found by walking the config), the database's password, and the
    secrets the environment holds (the providers' and speech endpoints' keys, the OpenAPI tools' headers)."""
    found = secrets_in(config)
    for dsn in (config.database.dsn, config.database.direct_dsn):
        password = urlsplit(dsn).password if dsn else None
        if password:
            found.append(password)
    found += [v for k, v in env.items() if v and re.fullmatch(r"SUMMON_PROVIDER_[A-Z0-9_]+_KEY", k)]
    found += [env[var] for var in ("SUMMON_STT_KEY", "SUMMON_TTS_KEY") if env.get(var)]  # the speech endpoints'
    found += [env[var] for headers in config.tools.openapi_headers.values() for var in headers.values()
              if env.get(var)]
    if config.members is not None:
        # Member bots' instance keys ("<id>:<key>"): the key itself is the secret, masked alone too.
        found += [entry.partition(":")[2] for entry in config.members.keys if ":" in entry]
    return found
