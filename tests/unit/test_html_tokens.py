"""HTML read as tokens in one pass (engine/core/html_tokens.py): what it reads, that it reads well-formed
HTML as the stdlib's parser does, and what it does with what is never closed."""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.html_tokens import End, Start, Text, Token, tokens, unescape


def read(markup: str) -> list[Token]:
    return list(tokens(markup))


def test_tags_attributes_and_text() -> None:
    assert read('<P class="a b" data-x=\'1>2\' hidden>hi &amp; bye</p><br/>') == [
        Start("p", (("class", "a b"), ("data-x", "1>2"), ("hidden", None))),
        Text("hi & bye"),
        End("p"),
        Start("br", (), self_closing=True),
    ]


def test_an_unquoted_value_keeps_its_slash() -> None:
    assert read("<a href=/x/>t</a>") == [Start("a", (("href", "/x/"),)), Text("t"), End("a")]


def test_comments_doctypes_and_instructions_are_dropped() -> None:
    assert read("<!DOCTYPE html>a<!-- x > y -->b<!---->c<!-->d<?php echo 1 ?>e</ x>f</>g") == [Text("abcdefg")]


def test_script_and_style_hold_raw_text() -> None:
    assert read("<script>if (a<b && c>d) x('</p>')</script>after") == [
        Start("script", ()), Text("if (a<b && c>d) x('</p>')"), End("script"), Text("after"),
    ]
    assert read("<style>p{}") == [Start("style", ()), Text("p{}")]


def test_a_lone_less_than_is_a_character() -> None:
    assert read("1 < 2 <3 <") == [Text("1 < 2 <3 <")]


def test_what_is_never_closed() -> None:
    # A tag whose ">" never comes is text (read once); an open comment runs to the end, as in a browser.
    assert read("a <b x='1") == [Text("a <b x='1")]
    assert read("a <b") == [Text("a <b")]
    assert read("<a" * 5) == [Text("<a" * 5)]
    assert read("a<!-- b <p>") == [Text("a")]
    assert read("a</p") == [Text("a</p")]
    assert read("a</") == [Text("a</")]


def test_references_never_raise() -> None:
    assert unescape("&#65;&#x42;&amp;&lt;&ampx &#" + "1" * 5000 + ";") == "AB&<&x \ufffd"
    assert unescape("&#x110000;&#1114109;&#0000000065;") == "\ufffd\U0010fffd" + "A"
    assert read("<a title='&#" + "9" * 9000 + "'>") == [Start("a", (("title", "\ufffd"),))]


# --- against the stdlib, on HTML that is well formed ---------------------------------------------------------


class _Recorder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.seen: list[Token] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(Start(tag, tuple(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(Start(tag, tuple(attrs), self_closing=True))

    def handle_endtag(self, tag: str) -> None:
        self.seen.append(End(tag))

    def handle_data(self, data: str) -> None:
        if self.seen and isinstance(self.seen[-1], Text):
            self.seen[-1] = Text(self.seen[-1].data + data)
        else:
            self.seen.append(Text(data))


def stdlib(markup: str) -> list[Token]:
    parser = _Recorder()
    parser.feed(markup)
    parser.close()
    return parser.seen


_NAMES = st.sampled_from(["p", "a", "b", "li", "ol", "pre", "br", "mx-reply", "td", "h1", "span", "img"])
_WORDS = st.text(st.characters(blacklist_characters="<>&", blacklist_categories=("Cs",)), min_size=1, max_size=12)
_VALUES = st.text(st.characters(blacklist_characters="<>&\"", blacklist_categories=("Cs",)), max_size=12)
_ATTRS = st.lists(st.tuples(st.sampled_from(["href", "alt", "start", "class", "title"]), _VALUES), max_size=3,
                  unique_by=lambda pair: pair[0])


@st.composite
def _well_formed(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "ref", "element", "empty"] if depth < 3 else ["text", "ref"]))
        if kind == "text":
            parts.append(draw(_WORDS))
        elif kind == "ref":
            parts.append(draw(st.sampled_from(["&amp;", "&lt;", "&gt;", "&quot;", "&#65;", "&#x1F600;", "&nbsp;"])))
        else:
            name = draw(_NAMES)
            attrs = "".join(f' {key}="{value}"' for key, value in draw(_ATTRS))
            if kind == "empty":
                parts.append(f"<{name}{attrs}/>")
            else:
                parts.append(f"<{name}{attrs}>{draw(_well_formed(depth + 1))}</{name}>")
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(_well_formed())
def test_well_formed_html_reads_as_the_stdlib_reads_it(markup: str) -> None:
    assert read(markup) == stdlib(markup)
