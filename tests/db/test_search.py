"""search_site: a publish indexes the docs, skills and commands; a republish finds a page's new words
and no longer its old ones; hits come back ranked, with snippets; an empty query is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content import Registry
from engine.content.files import compile_content, read_docs
from engine.content.registry import Doc
from engine.errors import ToolError
from engine.run.publish import publish
from engine.tools.base import RunRef
from engine.tools.search import index_rows, make_search_site
from tests.store import TestStore

REPO = Path(__file__).resolve().parents[2]
RUN = RunRef(id=1, bot="helper", surface="rooms")


def compiled(root: Path) -> Registry:
    result = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(result, Registry), result
    return result


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    return root


async def test_a_publish_indexes_the_docs_and_the_skills(db: TestStore, published: Registry) -> None:
    assert published.docs, "content/docs/ ships pages"
    search = make_search_site(db)
    out = await search(RUN, {"query": "encrypted rooms"})
    assert "Using the bots — the site's docs: docs/using-the-bots.md" in out
    assert "**encrypt" in out.lower() or "**Encrypt" in out
    out = await search(RUN, {"query": "Element client menus"})
    assert 'matrix help — one of the skills: open it with open_skill("matrix-help")' in out
    out = await search(RUN, {"query": "refund discount"})  # the kit's no-promises skill
    assert 'open_skill("no-promises")' in out


async def test_a_republish_finds_the_new_words_and_not_the_old(db: TestStore, site: Path) -> None:
    page = site / "docs" / "opening-hours.md"
    page.write_text("# Opening hours\n\nThe help desk answers on Tuesdays, from nine to five.\n", encoding="utf-8")
    await publish(db, compiled(site))
    search = make_search_site(db)
    assert "Opening hours" in await search(RUN, {"query": "tuesday"})

    page.write_text("# Opening hours\n\nThe help desk answers on Thursdays only.\n", encoding="utf-8")
    await publish(db, compiled(site))
    assert "Nothing on this site matches" in await search(RUN, {"query": "tuesday"})
    assert "Opening hours" in await search(RUN, {"query": "thursdays"})

    page.unlink()
    await publish(db, compiled(site))
    assert "Nothing on this site matches" in await search(RUN, {"query": "thursdays"})


async def test_hits_are_ranked_title_first_and_say_where_they_are(db: TestStore, site: Path) -> None:
    docs = site / "docs"
    (docs / "returns.md").write_text("---\ntitle: Returns and refunds\n---\nSend it back within a month.\n",
                                     encoding="utf-8")
    (docs / "shipping.md").write_text("# Shipping\n\nParcels go out on Mondays. A refund is never in a parcel.\n",
                                      encoding="utf-8")
    (docs / "gifts.md").write_text("# Gift cards\n\nGift cards never expire.\n", encoding="utf-8")
    await publish(db, compiled(site))
    out = await make_search_site(db)(RUN, {"query": "refunds"})
    lines = out.splitlines()
    assert lines[0] == '3 result(s) for "refunds", best first:'
    titles = [line for line in lines[1:] if line[:1].isdigit()]
    assert titles == [
        "1. Returns and refunds — the site's docs: docs/returns.md",  # in the title
        '2. no promises — one of the skills: open it with open_skill("no-promises")',  # the kit's, body only
        "3. Shipping — the site's docs: docs/shipping.md",  # once, in the body
    ], out
    assert "Gift cards" not in out
    assert "**refund**" in out


async def test_few_hits_come_back(db: TestStore, site: Path) -> None:
    for n in range(8):
        (site / "docs" / f"page-{n}.md").write_text(f"# Page {n}\n\nAbout widgets, part {n}.\n", encoding="utf-8")
    await publish(db, compiled(site))
    out = await make_search_site(db, hits=5)(RUN, {"query": "widgets"})
    assert out.splitlines()[0] == '5 result(s) for "widgets", best first:'


async def test_nothing_found_is_said_plainly(db: TestStore, published: Registry) -> None:
    out = await make_search_site(db)(RUN, {"query": "xylophone zeppelin"})
    assert out.startswith('Nothing on this site matches "xylophone zeppelin".')
    # only stop words: an empty search, not an error
    assert "Nothing on this site matches" in await make_search_site(db)(RUN, {"query": "the and of"})


@pytest.mark.parametrize("arguments", [{"query": ""}, {"query": "   \n "}, {}, {"query": 7}])
async def test_an_empty_query_is_refused(db: TestStore, arguments: dict[str, object]) -> None:
    with pytest.raises(ToolError, match="search_site needs"):
        await make_search_site(db)(RUN, arguments)


async def test_a_long_query_is_refused(db: TestStore) -> None:
    with pytest.raises(ToolError, match="a few words"):
        await make_search_site(db)(RUN, {"query": "word " * 100})


async def test_what_is_not_for_anyone_is_not_indexed(db: TestStore, site: Path) -> None:
    (site / "skills" / "staff-discounts.md").write_text(
        "---\ndescription: Open this when staff ask about their discount.\nfor: admin\n---\n"
        "Staff get forty percent off marmalade.\n",
        encoding="utf-8",
    )
    registry = compiled(site)
    assert "staff-discounts" in registry.skills
    assert all(row[1] != "staff-discounts" for row in index_rows(registry))
    await publish(db, registry)
    assert "Nothing on this site matches" in await make_search_site(db)(RUN, {"query": "marmalade"})


def test_a_doc_takes_its_title_from_front_matter_a_heading_or_its_name(tmp_path: Path) -> None:
    assert Doc.of("docs/a.md", "---\ntitle: 'Front'\n---\n# Heading\nbody\n") == Doc("docs/a.md", "Front",
                                                                                      "# Heading\nbody")
    assert Doc.of("docs/a.md", "\ufeffintro\n\n# Heading\r\nbody\r\n").title == "Heading"
    assert Doc.of("docs/how-to_pay.md", "just words").title == "How to pay"
    (tmp_path / "docs" / "deep").mkdir(parents=True)
    (tmp_path / "docs" / "deep" / "x.md").write_text("# X\n", encoding="utf-8")
    (tmp_path / "docs" / "bad.md").write_bytes(b"\xff\xfe")
    docs, unreadable = read_docs(tmp_path)
    assert [doc.path for doc in docs] == ["docs/deep/x.md"]
    assert [error.path for error in unreadable] == ["docs/bad.md"]
    assert read_docs(tmp_path / "nowhere") == ([], [])


FRENCH_STRINGS = """# Nos mots

## bots

### words

- language: fr
- asking: combien, comment, quand, pourquoi, quel, quelle, est-ce, que, qui, de, du, des, le, la, les, un, une,
  pour, mon, ma, mes, je, il, elle, faut, temps
"""


async def test_a_site_in_another_language_is_searched_in_it(db: TestStore, site: Path) -> None:
    # Not English-only: a French site's pages stem as French ("remboursements" finds "remboursement"), and a
    # question in French loses its asking words before it is searched.
    (site / "strings.md").write_text(FRENCH_STRINGS, encoding="utf-8")
    (site / "docs" / "remboursements.md").write_text(
        "# Remboursements\n\nUn remboursement prend quatorze jours ouvrés après le retour du colis.\n",
        encoding="utf-8")
    registry = compiled(site)
    assert registry.strings.get("words", "language") == "fr"
    await publish(db, registry)
    assert await db.pool.fetchval("SELECT DISTINCT language::text FROM site_search") == "french"
    search = make_search_site(db, lambda: registry.strings)
    out = await search(RUN, {"query": "Combien de temps pour mes remboursements ?"})
    assert "Remboursements — the site's docs: docs/remboursements.md" in out, out
    # The same question searched as English (no stemming of French, nothing dropped) finds nothing.
    (site / "strings.md").write_text(FRENCH_STRINGS.replace("- language: fr", "- language: english"), encoding="utf-8")
    english = compiled(site)
    await publish(db, english)
    assert "Nothing on this site matches" in await make_search_site(db)(RUN, {"query": "Combien de temps pour mes remboursements ?"})


def test_a_language_with_no_configuration_searches_simply() -> None:
    from engine.tools.search import searched, text_search_config

    assert [text_search_config(x) for x in ("fr", "French", "pt-BR", "Deutsch", None, "klingon")] == [
        "french", "french", "portuguese", "german", "english", "simple"]
    assert searched("what do memberships cost?", frozenset({"what", "do"})) == "memberships cost?"
    assert searched('what "what do" -what', frozenset({"what"})) == '"what do" -what'
    assert searched("what", frozenset({"what"})) == "what"  # nothing but asking words: searched as asked
