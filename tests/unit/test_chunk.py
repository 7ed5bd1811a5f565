"""The pieces an answer is said in: the first sentence, or its first clause when it runs past a dozen words —
never mid-phrase — then whole sentences packed. Pure."""

from __future__ import annotations

import pytest

from engine.core.chunk import opening, pack, pieces, sentences


@pytest.mark.parametrize(("text", "expected"), [
    ("Hello there. How are you?", ["Hello there.", "How are you?"]),
    ("Wait! Really?! Yes…", ["Wait!", "Really?!", "Yes…"]),
    ("It costs 3.50 euro. Pay at the desk.", ["It costs 3.50 euro.", "Pay at the desk."]),
    ("Ask Dr. Byrne, e.g. on Monday. Or Mr. Ó Sé.", ["Ask Dr. Byrne, e.g. on Monday.", "Or Mr. Ó Sé."]),
    ("J. R. R. Tolkien wrote it. Read it.", ["J. R. R. Tolkien wrote it.", "Read it."]),
    ('She said "go." Then she went.', ['She said "go."', "Then she went."]),
    ("First line\n- one\n- two", ["First line", "- one", "- two"]),
    ("no stop at the end", ["no stop at the end"]),
    ("   ", []),
])
def test_sentences(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@pytest.mark.parametrize(("sentence", "first", "rest"), [
    # A dozen words or fewer: the whole sentence.
    ("The library opens at nine on weekdays and ten on Saturdays.", "The library opens at nine on weekdays and ten on Saturdays.", ""),
    # Past a dozen: its first clause…
    ("When you get to the station on the far side of the river, the bus stop is on your left.",
     "When you get to the station on the far side of the river,", "the bus stop is on your left."),
    ("There are two ways to do it; the first is quicker but costs a little more than the second one.",
     "There are two ways to do it;", "the first is quicker but costs a little more than the second one."),
    ("Here is what I would do — book the early train and take the bus from the station to the hotel.",
     "Here is what I would do —", "book the early train and take the bus from the station to the hotel."),
    # …never a clause too short to stand ("Well,") or leaving too little behind…
    ("Well, I checked the three systems you mentioned yesterday and everything looks fine to me now.",
     "Well, I checked the three systems you mentioned yesterday and everything looks fine to me now.", ""),
    # …and with no clause boundary, never mid-phrase: the whole sentence, and the start is simply slower.
    ("I checked the three systems you mentioned yesterday afternoon and everything looks completely normal now.",
     "I checked the three systems you mentioned yesterday afternoon and everything looks completely normal now.", ""),
    # A number's comma is no clause boundary.
    ("The population of the town grew from 12,000 people to more than 30,000 people in only ten years.",
     "The population of the town grew from 12,000 people to more than 30,000 people in only ten years.", ""),
])
def test_the_opening_piece(sentence: str, first: str, rest: str) -> None:
    assert opening(sentence) == (first, rest)


def test_an_answer_in_pieces_opens_short_and_packs_the_rest() -> None:
    answer = ("When you get to the station on the far side of the river, the bus stop is on your left. "
              + " ".join(f"Sentence number {n} is here." for n in range(20)))
    said = pieces(answer)
    assert said[0] == "When you get to the station on the far side of the river,"
    assert said[1].startswith("the bus stop is on your left. Sentence number 0 is here.")
    assert all(len(p) <= 300 for p in said[1:])
    assert " ".join(said).split() == answer.split()  # nothing lost, nothing added


def test_a_four_sentence_answer_is_no_longer_one_piece() -> None:
    # The measured case: four sentences packed as one 219-character piece before a word was heard.
    answer = ("Sure, I can help with that. The museum opens at ten and closes at six, every day but Monday. "
              "Tickets are twelve euro, or free for children under twelve. You can buy them at the door.")
    said = pieces(answer)
    assert said[0] == "Sure, I can help with that."
    assert len(said) == 2 and len(said[0]) < 40


def test_pack_keeps_whole_sentences() -> None:
    long = "word " * 80 + "end."
    assert pack(f"Short one. {long} Short two.", chars=50) == ["Short one.", long.strip(), "Short two."]
    assert pack("") == []
