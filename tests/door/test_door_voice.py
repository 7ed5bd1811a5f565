"""A bot's ``voice:`` block through the door (issue 25 §6): served to the front end on /v1/models (the voice, the
ones a listener may choose, the speech provider, the first words, the wait), its first words sent at once while
the model still thinks, and its own wait — not the door's — deciding when the work outlives the turn."""

from __future__ import annotations

import time

import httpx
import pytest

from appservice.kinds import KINDS
from engine.content import Registry, compile_sources
from engine.content.files import KIT_DIR, read_content
from tests.door.conftest import CALLER, ROOMS_ONLY, SERVER, Harness
from tests.providers.fake_provider import Canned, openai_text

VOICED = CALLER.replace("tools: [current_room]\n", "tools: [current_room]\nvoice:\n  voice: alloy\n"
                        "  voices: [alloy, verse]\n  provider: openai-speech\n  first: One moment.\n  wait: 1.5\n")


@pytest.fixture
def registry() -> Registry:
    result = compile_sources({"bots/caller.md": VOICED, "bots/roomy.md": ROOMS_ONLY}, kinds=KINDS, server_name=SERVER,
                             kit=read_content(KIT_DIR))
    assert isinstance(result, Registry), result
    return result


async def test_the_voice_block_is_served_and_its_first_words_and_its_wait_are_used(door: Harness) -> None:
    token = door.grant()
    async with httpx.AsyncClient() as http:
        listed = (await http.get(f"{door.url}/models", headers={"Authorization": f"Bearer {token}"})).json()
    assert listed["data"][0]["voice"] == {"voice": "alloy", "voices": ["alloy", "verse"], "provider": "openai-speech",
                                          "first": "One moment.", "wait": 1.5}
    # The model takes 1.2 s: the first words arrived well before it answered, then the answer.
    door.fake.queue("openai", Canned(body=openai_text("The library opens at nine.").body, delay=1.2))
    started = time.monotonic()
    stream = await door.aclient(token).chat.completions.create(
        model="caller", messages=[{"role": "user", "content": "When does the library open?"}], stream=True)
    contents = [(part.choices[0].delta.content, time.monotonic() - started) async for part in stream
                if part.choices and part.choices[0].delta.content]
    assert contents[0][0] == "One moment. " and contents[0][1] < 1.0
    assert "".join(text for text, _ in contents) == "One moment. The library opens at nine."
    # Its own wait (1.5 s), not the door's (20 s): a 4 s answer outlives the turn.
    door.fake.queue("openai", Canned(body=openai_text("Much later.").body, delay=4.0))
    started = time.monotonic()
    done = await door.aclient(token).chat.completions.create(
        model="caller", messages=[{"role": "user", "content": "Take your time."}])
    assert time.monotonic() - started < 3.5
    assert "Much later." not in (done.choices[0].message.content or "")
