"""One table of every benchmark's ratios, read from ``.dev/bench/*.json`` (written by each benchmark), with the
machine's load as each phase started (``busy`` above one per core: its figures are not a quiet machine's) and how
long each phase took. Run: ``python -m tests.bench.table`` (``make bench`` runs it last)."""

from __future__ import annotations

import json
import sys

from tests.bench.results import BENCH_DIR

ORDER = ["mention", "door", "engine", "load", "ingest", "idle"]


def main() -> int:
    files = sorted(BENCH_DIR.glob("*.json"), key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else 99, p.stem))
    if not files:
        print(f"no benchmark figures in {BENCH_DIR}; run `make bench`", file=sys.stderr)
        return 1
    rows = []
    seconds = 0.0
    for path in files:
        data = json.loads(path.read_text())
        machine = data["machine"]
        load = machine.get("start_load", machine["load"])[0]
        busy = " busy" if load > (machine.get("cores") or 1) else ""
        took = data.get("seconds")
        seconds += took or 0.0
        for i, r in enumerate(data["ratios"]):
            floor = "" if r["floor"] is None else f"{r['floor']:.1f}"
            sign = "≤" if r["sense"] == "at_most" else "≥"
            first = i == 0
            rows.append((data["bench"], r["what"], f"{r['value']:.1f}", floor, r["unit"], f"{r['ratio']:.2f}",
                         f"{sign} {r['target']:g}", "met" if r["met"] else "NOT met",
                         f"{load:.2f}{busy}" if first else "", f"{took:.0f}" if first and took is not None else ""))
    head = ("bench", "figure", "summon", "floor", "unit", "ratio", "target", "", "start load", "s")
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(str(cell).ljust(w) if i < 2 or i == 7 else str(cell).rjust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    print(f"{len(files)} phases, {seconds / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
