"""Where the benchmarks leave their figures: one JSON file per benchmark under ``.dev/bench/``, each figure
with the floor it was measured against in the same run, the ratio and its target; ``python -m
tests.bench.table`` prints them all as one table (``make bench`` does, after running them)."""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / ".dev" / "bench"
# Each benchmark is a process of its own (``make bench`` runs them one after another), so this module is imported
# as it starts: the machine's load then, and when, are the phase's own (the table flags a start above one per core).
STARTED_AT = time.monotonic()
START_LOAD = os.getloadavg()


@dataclass(frozen=True)
class Ratio:
    """``value`` (summon's) against ``floor`` (the same thing without summon, measured in the same run):
    ``ratio`` = value / floor, met when it is ``at_most`` / ``at_least`` the target."""

    what: str
    value: float
    floor: float | None
    unit: str
    target: float
    sense: Literal["at_most", "at_least"] = "at_most"

    @property
    def ratio(self) -> float:
        if self.floor is None:
            return self.value
        return self.value / self.floor if self.floor else float("inf")

    @property
    def met(self) -> bool:
        return self.ratio <= self.target if self.sense == "at_most" else self.ratio >= self.target


def write(name: str, ratios: list[Ratio], figures: dict[str, Any] | None = None) -> Path:
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    path = BENCH_DIR / f"{name}.json"
    load = os.getloadavg()
    path.write_text(json.dumps({
        "bench": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cores": os.cpu_count(), "load": [round(x, 2) for x in load], "python": platform.python_version(),
                    "start_load": [round(x, 2) for x in START_LOAD]},
        "seconds": round(time.monotonic() - STARTED_AT, 1),
        "ratios": [{**asdict(r), "ratio": round(r.ratio, 4), "met": r.met} for r in ratios],
        "figures": figures or {},
    }, indent=1))
    for r in ratios:
        floor = f" vs floor {r.floor:.1f} {r.unit}" if r.floor is not None else ""
        sign = "≤" if r.sense == "at_most" else "≥"
        print(f"  {r.what}: {r.value:.1f} {r.unit}{floor} → {r.ratio:.2f} (target {sign} {r.target:g}): "
              f"{'met' if r.met else 'NOT met'}")
    print(f"  (figures in {path})")
    return path
