from __future__ import annotations

import pytest

from appservice.matrix.delivery.render import Rendered, render, sanitize


@pytest.mark.parametrize(
    "markdown",
    [
        "Hello there.",
        "It's 5 < 6 & that's fine",
        "line one\nline two",
        "  padded  ",
    ],
)
def test_plain_answers_stay_plain(markdown: str) -> None:
    assert render(markdown) == Rendered(body=markdown.strip(), formatted_body=None)


def test_a_paragraph_that_reads_differently_from_its_markdown_keeps_its_html() -> None:
    # The HTML reads "escaped * star", not the body's backslash.
    assert render("escaped \\* star").formatted_body == "<p>escaped * star</p>"


@pytest.mark.parametrize(
    ("markdown", "formatted_body"),
    [
        ("some **bold** text", "<p>some <strong>bold</strong> text</p>"),
        ("*em* and ~~gone~~ and `x`", "<p><em>em</em> and <s>gone</s> and <code>x</code></p>"),
        ("- one\n- two", "<ul>\n<li>one</li>\n<li>two</li>\n</ul>"),
        ("3. three\n4. four", '<ol start="3">\n<li>three</li>\n<li>four</li>\n</ol>'),
        (
            "```python\nprint('hi')\n```",
            "<pre><code class=\"language-python\">print('hi')\n</code></pre>",
        ),
        ("# Title", "<h1>Title</h1>"),
        ("> quoted", "<blockquote>\n<p>quoted</p>\n</blockquote>"),
        ("a **b**\nc", "<p>a <strong>b</strong><br>\nc</p>"),
        (
            "[site](https://example.org/a?b=1&c=2)",
            '<p><a href="https://example.org/a?b=1&amp;c=2">site</a></p>',
        ),
        ("mail [me](mailto:a@example.org)", '<p>mail <a href="mailto:a@example.org">me</a></p>'),
    ],
)
def test_markdown_becomes_matrix_html(markdown: str, formatted_body: str) -> None:
    assert render(markdown) == Rendered(body=markdown, formatted_body=formatted_body)


def test_a_table_is_kept_without_its_style() -> None:
    rendered = render("| a | b |\n|--:|---|\n| 1 | 2 |")
    assert rendered.formatted_body is not None
    for tag in ("<table>", "<thead>", "<tbody>", "<tr>", "<th>a</th>", "<td>2</td>"):
        assert tag in rendered.formatted_body
    assert "style" not in rendered.formatted_body


def test_raw_html_from_the_model_is_escaped() -> None:
    rendered = render("**hi** <script>alert(1)</script> <b onclick=x>b</b>")
    assert rendered.formatted_body == (
        "<p><strong>hi</strong> &lt;script&gt;alert(1)&lt;/script&gt; &lt;b onclick=x&gt;b&lt;/b&gt;</p>"
    )


@pytest.mark.parametrize(
    "markdown",
    [
        "**x** [click](javascript:alert(1))",
        "**x** [click](JavaScript:alert(1))",
        "**x** [click](data:text/html;base64,PHNjcmlwdD4=)",
        "**x** [click](/relative/path)",
        "**x** [click](vbscript:msgbox)",
    ],
)
def test_unsafe_links_lose_their_href(markdown: str) -> None:
    rendered = render(markdown)
    assert rendered.formatted_body is not None
    assert "href" not in rendered.formatted_body
    assert "click" in rendered.formatted_body


def test_images_only_from_mxc() -> None:
    rendered = render("![chart](https://evil.example/pixel.png) ![ok](mxc://localhost/AbCdEf)")
    assert rendered.formatted_body == (
        '<p><a href="https://evil.example/pixel.png">chart</a> <img src="mxc://localhost/AbCdEf" alt="ok"></p>'
    )


@pytest.mark.parametrize(
    ("html", "clean"),
    [
        ('<img src="https://evil.example/x.png" alt="x">', '<img alt="x">'),
        (
            '<img src="mxc://localhost/abc" alt="x" width="10" onerror="y">',
            '<img src="mxc://localhost/abc" alt="x" width="10">',
        ),
        ('<a href="mxc://localhost/abc">m</a>', "<a>m</a>"),
        (
            '<a href="https://x.org" target="_blank" rel="opener" title="t">x</a>',
            '<a href="https://x.org" target="_blank">x</a>',
        ),
        ('<a href="magnet:?xt=urn:btih:abc">m</a>', '<a href="magnet:?xt=urn:btih:abc">m</a>'),
        ('<code class="language-rust hljs evil">x</code>', '<code class="language-rust">x</code>'),
        ('<code class="hljs">x</code>', "<code>x</code>"),
        (
            '<span data-mx-spoiler="why" data-mx-color="#ff0000" style="color:red">s</span>',
            '<span data-mx-spoiler="why" data-mx-color="#ff0000">s</span>',
        ),
        ('<div data-mx-maths="x^2" class="c">x²</div>', '<div data-mx-maths="x^2">x²</div>'),
        ('<ol start="7" type="a"><li>x</li></ol>', '<ol start="7"><li>x</li></ol>'),
        ('<ol start="-1"><li>x</li></ol>', "<ol><li>x</li></ol>"),
        ("<font color=red>f</font><iframe src=x></iframe><mx-reply>r</mx-reply>", "fr"),
        ("<script>alert(1)</script><style>p{}</style>ok", "ok"),
        ('<p lang="en" title="t" id="i" class="c">x</p>', "<p>x</p>"),
        (
            "<details><summary>more</summary><p>hidden</p></details>",
            "<details><summary>more</summary><p>hidden</p></details>",
        ),
        (
            "<sup>1</sup><sub>2</sub><u>u</u><del>d</del><hr><caption>c</caption>",
            "<sup>1</sup><sub>2</sub><u>u</u><del>d</del><hr>c",
        ),
    ],
)
def test_sanitize_to_the_matrix_allowlist(html: str, clean: str) -> None:
    assert sanitize(html) == clean


def test_body_is_the_markdown_itself() -> None:
    markdown = "## Plan\n\n1. **first**\n2. second\n"
    rendered = render(markdown)
    assert rendered.body == markdown.strip()
    assert rendered.formatted_body is not None and rendered.formatted_body.startswith("<h2>Plan</h2>")


def test_empty_answer() -> None:
    assert render("") == Rendered(body="", formatted_body=None)
