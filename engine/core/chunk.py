"""The pieces an answer is said in. Pure.

The first word is the only one anybody waits for. Packing sentences together up to a few hundred characters
is right for a chapter, made before anybody presses play; in a conversation it is the difference between an
assistant and a form. So the opening piece is the first sentence — or its first clause, when that sentence
runs past a dozen words — and everything after it is packed as before. Never mid-phrase: cutting at a word
count cuts a noun phrase in half and the voice drops as though it had finished, so where a long sentence has
no clause boundary to stop at, the whole sentence is said and the start is simply slower.
"""

from __future__ import annotations

import re

# A first sentence longer than this many words opens with its first clause.
OPENING_WORDS = 12
# A clause shorter than this on either side of the cut is no piece of its own ("Well, …" stays whole).
CLAUSE_WORDS = 3
# The rest is packed into pieces of whole sentences up to this many characters.
PACK_CHARS = 300

# Where a sentence ends: its stop (., !, ?, …), any closing quote or bracket, then a space or the end.
_STOP = re.compile(r"""[.!?…]+["'”’)\]]*(?=\s|$)""")
# Words before a full stop that do not end a sentence.
_ABBREVIATIONS = frozenset({
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "no", "approx", "cf", "fig", "jr", "sr",
})
# Where a clause ends: a comma, semicolon or colon before a space, or a dash between spaces.
_CLAUSE = re.compile(r"[,;:](?=\s)|\s[—–-](?=\s)")


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, in order, each stripped; a line break ends one too (a list item, a
    paragraph). A decimal point, an initial and the usual abbreviations do not."""
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        for stop in _STOP.finditer(line):
            before = line[start:stop.start()].split()
            last = before[-1].lower().rstrip(".") if before else ""
            if stop.group().startswith(".") and len(stop.group().rstrip("\"'”’)]")) == 1 and (
                    last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
                continue
            piece = line[start:stop.end()].strip()
            if piece:
                out.append(piece)
            start = stop.end()
        rest = line[start:].strip()
        if rest:
            out.append(rest)
    return out


def opening(sentence: str, *, words: int = OPENING_WORDS) -> tuple[str, str]:
    """``sentence`` cut for a fast first word: (its first clause, the rest) when it runs past ``words`` words
    and has a clause boundary with enough on both sides; otherwise (the whole sentence, "")."""
    if len(sentence.split()) <= words:
        return sentence, ""
    for boundary in _CLAUSE.finditer(sentence):
        head = sentence[:boundary.end()].strip()
        tail = sentence[boundary.end():].strip()
        if len(head.split()) >= CLAUSE_WORDS and len(tail.split()) >= CLAUSE_WORDS:
            return head, tail
    return sentence, ""


def pieces(text: str, *, words: int = OPENING_WORDS, chars: int = PACK_CHARS) -> list[str]:
    """``text`` in the pieces a voice says it in: the opening piece (``opening`` of the first sentence), then
    the rest packed (``pack``)."""
    said = sentences(text)
    if not said:
        return []
    first, tail = opening(said[0], words=words)
    return [first, *_packed(([tail] if tail else []) + said[1:], chars)]


def pack(text: str, *, chars: int = PACK_CHARS) -> list[str]:
    """``text`` as whole sentences packed into pieces of up to ``chars`` characters (a longer sentence is a
    piece of its own, never cut): what follows an answer's opening."""
    return _packed(sentences(text), chars)


def _packed(said: list[str], chars: int) -> list[str]:
    out: list[str] = []
    current = ""
    for sentence in said:
        if current and len(current) + 1 + len(sentence) > chars:
            out.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        out.append(current)
    return out
