"""What a model call cost: usage × a price table (USD per token, per provider and model), editable.

The kit ships ``prices.yaml`` next to this module; a deployment's own file (``SUMMON_PRICES``) is laid
over it, model by model. The format is described at the top of ``prices.yaml``.

A spend limit cannot hold against a model with no price, and every bot has one: with buying on, a bot that
may be sent to an unpriced model is refused when content is published (``Chain.unpriced``), and the chain
does not ask one for a call that has a limit. A local or self-hosted model that really is free is priced 0,
explicitly. Only a call with no limit at all is still recorded at cost 0 with ``unpriced`` on its step.
What a call may cost at worst, before it is made, is ``engine.providers.worst``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.errors import ConfigError
from engine.providers.translate import Usage


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def cost(self, usage: Usage) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (usage.input * self.input + usage.cache_read * read + usage.cache_write * write
                + usage.output * self.output)


_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


FREE = Price(input=0, output=0)


@dataclass(frozen=True)
class PriceTable:
    prices: Mapping[tuple[str, str], Price]
    version: str = ""
    # Providers whose every model costs nothing (``SUMMON_PROVIDER_<NAME>_FREE=1``: a local model).
    free: frozenset[str] = frozenset()

    def price(self, provider: str, model: str, *, kind: str | None = None) -> Price | None:
        """The provider's own entry first, then its kind's; each by the exact name, then undated. A provider
        declared free prices every model at 0."""
        if provider in self.free:
            return FREE
        names = [model]
        undated = _DATED.sub("", model)
        if undated != model:
            names.append(undated)
        for owner in (provider, kind):
            if owner is None:
                continue
            for name in names:
                found = self.prices.get((owner, name))
                if found is not None:
                    return found
        return None

    def cost(self, provider: str, model: str, usage: Usage, *, kind: str | None = None) -> float | None:
        """USD for this usage, or None when the model has no price."""
        found = self.price(provider, model, kind=kind)
        return None if found is None else found.cost(usage)

    def over(self, other: PriceTable) -> PriceTable:
        """This table with ``other``'s entries laid over it (``other`` wins, model by model)."""
        return PriceTable({**self.prices, **other.prices}, other.version or self.version)


def parse_prices(data: object, *, source: str = "prices") -> PriceTable:
    """A price table from its YAML data. A bad entry is refused, naming it."""
    if data is None:
        return PriceTable({})
    if not isinstance(data, Mapping) or not isinstance(data.get("prices", {}), Mapping):
        raise ConfigError(f"{source}: a price table is a mapping with 'prices: {{provider: {{model: ...}}}}'")
    unknown = set(data) - {"version", "prices"}
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {sorted(map(str, unknown))}; expected 'version' and 'prices'")
    table: dict[tuple[str, str], Price] = {}
    for provider, models in (data.get("prices") or {}).items():
        if not isinstance(models, Mapping):
            raise ConfigError(f"{source}: prices.{provider} must map model names to prices")
        for model, entry in models.items():
            try:
                table[(str(provider), str(model))] = Price.model_validate(_numbers(entry))
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors())
                raise ConfigError(f"{source}: prices.{provider}.{model}: {problems}") from exc
    return PriceTable(table, str(data.get("version") or ""))


def _numbers(entry: Any) -> Any:
    # YAML 1.1 reads ``1e-7`` (no dot) as a string; a price is still meant.
    if not isinstance(entry, Mapping):
        return entry
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        out[str(key)] = value
    return out


def kit_prices() -> PriceTable:
    text = resources.files("engine.providers").joinpath("prices.yaml").read_text(encoding="utf-8")
    return parse_prices(yaml.safe_load(text), source="engine/providers/prices.yaml")


def load_prices(path: str | None = None) -> PriceTable:
    """The kit's prices, with a deployment's file (when given) laid over them."""
    table = kit_prices()
    if not path:
        return table
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"SUMMON_PRICES: cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML: {exc}") from exc
    return table.over(parse_prices(data, source=path))
