"""The recall's defaults, measured on the set in recall_pairs.yaml with the shipped embedding model: at the
distance floor no unrelated remark is recalled and nearly every related one is, and the count holds every right
memory that passes the floor. A change of model or of the defaults that breaks this fails here."""

from __future__ import annotations

from pathlib import Path

import yaml

from engine.content.commands import without_address
from engine.memory.embedder import Embedder
from engine.memory.recall import RECALL_COUNT, RECALL_FLOOR

PAIRS = yaml.safe_load((Path(__file__).parent / "recall_pairs.yaml").read_text(encoding="utf-8"))


def distance(a: list[float], b: list[float]) -> float:
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True))


async def test_the_floor_recalls_no_unrelated_remark_and_nearly_every_related_one() -> None:
    embedder = Embedder()
    related = [distance(await embedder.passage(p["told"]), await embedder.query(p["asked"])) for p in PAIRS["related"]]
    unrelated = [distance(await embedder.passage(p["told"]), await embedder.query(p["asked"]))
                 for p in PAIRS["unrelated"]]
    assert len(await embedder.query("x")) == 384
    assert min(unrelated) > RECALL_FLOOR  # recalling nothing beats recalling something unrelated
    assert sum(d <= RECALL_FLOOR for d in related) >= 13  # of 15
    assert max(related) < 0.3 and min(unrelated) > 0.2  # the model separates them at all


async def test_the_count_holds_every_right_memory_that_passes_the_floor() -> None:
    embedder = Embedder()
    told = [p["told"] for p in PAIRS["related"]]
    vectors = [await embedder.passage(t) for t in told]
    for pair in PAIRS["related"]:
        question = await embedder.query(pair["asked"])
        ranked = sorted((distance(v, question), t) for v, t in zip(vectors, told, strict=True))
        within = [t for d, t in ranked if d <= RECALL_FLOOR]
        if pair["told"] in within:
            assert within.index(pair["told"]) < RECALL_COUNT, pair


async def test_lines_as_a_client_sends_them_are_compared_without_the_bots_name() -> None:
    # A client sends "Recall Bot: My dog is called Biscuit." (the pill read as the display name): with the name
    # kept, every memory shares it and unrelated remarks fall under the floor (8 of the set did). The words are
    # remembered and compared without the address, and the floor holds as it does for the bare words.
    embedder = Embedder()
    names = ("Recall Bot", "@bot_recall:localhost")

    async def far(pair: dict[str, str], *, strip: bool) -> float:
        told, asked = (f"Recall Bot: {pair['told']}", f"Recall Bot: {pair['asked']}")
        if strip:
            told, asked = without_address(told, names), without_address(asked, names)
        return distance(await embedder.passage(told), await embedder.query(asked))

    kept = [await far(p, strip=False) for p in PAIRS["unrelated"]]
    assert sum(d <= RECALL_FLOOR for d in kept) >= 3  # what the mention did to recall before
    assert min([await far(p, strip=True) for p in PAIRS["unrelated"]]) > RECALL_FLOOR
    related = [await far(p, strip=True) for p in PAIRS["related"]]
    assert sum(d <= RECALL_FLOOR for d in related) >= 13
