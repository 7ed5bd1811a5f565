"""Each mechanism once: one delivery queue. The outbox, the desk's webhooks and the room actions are claimed,
retried and given up by the one loop in ``engine/run/delivery.py``; their claim and next-due statements are made
from the one template each in ``deliveries.sql``. A second queue loop — code that waits for a queue's next due
row, or decides between a retry and a permanent failure after a backoff — is refused here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from appservice.desk.webhooks import WebhookSender
from appservice.matrix.outbox import Outbox
from engine.run.delivery import DeliveryLoop
from engine.store.queries import QUERIES_DIR

ROOT = Path(__file__).resolve().parents[2]
LOOP = ROOT / "engine" / "run" / "delivery.py"
QUEUES = {"outbox.sql": ("claim_outbox", "next_outbox_due"),
          "desk_webhooks.sql": ("desk_claim_deliveries", "desk_next_delivery_due"),
          "room_actions.sql": ("claim_room_actions", "next_room_action_due")}


def production() -> list[Path]:
    return [p for folder in ("engine", "appservice") for p in sorted((ROOT / folder).rglob("*.py"))]


def calls(node: ast.AST) -> set[str]:
    """The names called in ``node`` (``x.y.claim(...)`` as ``claim``)."""
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            found.add(f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "")
    return found


def test_only_the_delivery_module_waits_for_a_queues_next_due_row() -> None:
    """``next_due`` is asked by the loop alone (a queue's own ``next_due`` may pass the question on)."""
    offenders = []
    for path in production():
        if path == LOOP:
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name != "next_due" \
                    and "next_due" in calls(fn):
                offenders.append(f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}")
    assert not offenders, f"a second delivery loop: {offenders}"


def test_only_the_delivery_module_decides_between_a_retry_and_giving_up() -> None:
    """The decision after a refusal — the backoff's wait, else failed for good — is the loop's; a sender only
    sends and records."""
    offenders = []
    for path in production():
        if path == LOOP:
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and \
                    {"backoff", "retry", "failed"} <= calls(fn) | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}:
                offenders.append(f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}")
    assert not offenders, f"a retry decision outside engine/run/delivery.py: {offenders}"


def test_the_three_queues_are_the_one_loop() -> None:
    assert issubclass(Outbox, DeliveryLoop) and issubclass(WebhookSender, DeliveryLoop)
    rooms = (ROOT / "appservice" / "matrix" / "rooms.py").read_text(encoding="utf-8")
    assert "DeliveryLoop(" in rooms


def test_every_queue_claims_and_says_when_next_from_the_one_template() -> None:
    for file, (claim, due) in QUEUES.items():
        text = (QUERIES_DIR / file).read_text(encoding="utf-8")
        for name, template in ((claim, "claim_due"), (due, "next_due")):
            block = re.search(rf"^-- name: {name}\n(.*?)(?=^-- name:|\Z)", text, flags=re.MULTILINE | re.DOTALL)
            assert block, f"{file} declares no {name}"
            statement = [line for line in block.group(1).strip().splitlines() if not line.startswith("-- ")
                         or line.startswith("-- from template:")]
            assert statement and statement[-1].startswith(f"-- from template: {template}("), \
                f"{name} is written out rather than made from {template}"
    loops = [p for p in production() if "class DeliveryLoop" in p.read_text(encoding="utf-8")]
    assert loops == [LOOP]
