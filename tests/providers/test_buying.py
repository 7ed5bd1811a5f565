"""Buying is opt-in, and the rule lives in the provider layer: ``choose_answerer`` with a real fake
provider configured, asserting on what reached the server (nothing, unless buying is on and the run
carries no script)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping

import pytest

from appservice.config import provider_settings
from engine.clock import FakeClock
from engine.core.messages import Message, ModelRequest
from engine.providers.config import Answering, choose_answerer
from engine.providers.mock import CHOSEN, NO_KEY, NOT_SWITCHED_ON, StandInModel
from tests.providers.fake_provider import FakeProvider, openai_text

REQUEST = ModelRequest(system="", messages=(Message("user", "hi"),), model="gpt-4o-mini")
SCRIPT = [{"text": "scripted answer"}]


def keyed(fake: FakeProvider, **extra: str) -> dict[str, str]:
    return {"SUMMON_PROVIDERS": "openai", "SUMMON_PROVIDER_OPENAI_URL": fake.openai_url,
            "SUMMON_PROVIDER_OPENAI_KEY": "sk-live", **extra}


@pytest.fixture
async def choose() -> AsyncIterator[Callable[[Mapping[str, str]], Answering]]:
    made: list[Answering] = []

    def make(env: Mapping[str, str]) -> Answering:
        answering = choose_answerer(provider_settings(env), FakeClock())
        made.append(answering)
        return answering

    yield make
    for answering in made:
        await answering.aclose()


async def test_live_with_a_key_buys(fake: FakeProvider, choose: Callable[[Mapping[str, str]], Answering]) -> None:
    # The control for the tests below: this configuration does reach the server.
    fake.queue("openai", openai_text("bought"))
    answering = choose(keyed(fake, AGENTS_LIVE="1"))
    [step] = await answering.answer(REQUEST, turn=0)
    assert answering.buying and answering.stand_in is None
    assert step.text == "bought" and step.provider == "openai"
    assert len(fake.received()) == 1


async def test_a_script_is_never_bought_whatever_keys_exist(
    fake: FakeProvider, choose: Callable[[Mapping[str, str]], Answering],
) -> None:
    fake.queue("openai", openai_text("bought"))
    answering = choose(keyed(fake, AGENTS_LIVE="1"))
    assert answering.buying
    # The stand-in chosen at the root, before a chain that buys: what its book scripts is never sent.
    scripted = StandInModel(lambda _: SCRIPT, answering, FakeClock())
    [step] = await scripted.answer(REQUEST, turn=0)
    [past_the_end] = await scripted.answer(REQUEST, turn=1)
    assert step.text == "scripted answer" and step.provider == "mock"
    assert past_the_end.text == "" and past_the_end.provider == "mock"
    assert fake.received() == []


@pytest.mark.parametrize(
    "extra",
    [{}, {"AGENTS_LIVE": "0"}, {"AGENTS_LIVE": ""}],
    ids=["live_unset", "live_0", "live_empty"],
)
async def test_a_key_not_switched_on_stands_in_and_says_so(
    fake: FakeProvider, choose: Callable[[Mapping[str, str]], Answering], extra: dict[str, str],
) -> None:
    fake.queue("openai", openai_text("bought"))
    answering = choose(keyed(fake, **extra))
    [step] = await answering.answer(REQUEST, turn=0)
    assert not answering.buying and answering.stand_in == "not_switched_on"
    assert step.text == NOT_SWITCHED_ON and step.provider == "mock"
    assert fake.received() == []
    # No provider, no bots: the heartbeat says nothing can answer, and why.
    assert (answering.status().usable, answering.status().mode) == (False, "no provider: not switched on")


@pytest.mark.parametrize("extra", [{"AGENTS_LIVE": "1"}, {}], ids=["live_too", "not_live"])
async def test_the_stand_in_chosen_answers_and_says_so_whatever_keys_exist(
    fake: FakeProvider, choose: Callable[[Mapping[str, str]], Answering], extra: dict[str, str],
) -> None:
    fake.queue("openai", openai_text("bought"))
    answering = choose(keyed(fake, SUMMON_AGENT_MOCK="1", **extra))
    [step] = await answering.answer(REQUEST, turn=0)
    assert not answering.buying and answering.stand_in == "chosen"
    assert step.text == CHOSEN and "stand-in" in step.text and step.provider == "mock"
    assert (answering.status().usable, answering.status().mode) == (True, "stand-in: chosen")
    assert fake.received() == []


@pytest.mark.parametrize(
    "env",
    [
        {"AGENTS_LIVE": "1"},
        {"AGENTS_LIVE": "1", "SUMMON_PROVIDERS": "openai", "SUMMON_PROVIDER_OPENAI_KEY": ""},
        # The SDKs' own variables are not ours: a key must be given to summon, not found lying about.
        {"AGENTS_LIVE": "1", "OPENAI_API_KEY": "sk-stray", "ANTHROPIC_API_KEY": "sk-ant-stray"},
    ],
    ids=["no_providers", "provider_without_key", "only_sdk_variables"],
)
async def test_no_key_at_all_stands_in_and_says_so(
    fake: FakeProvider, choose: Callable[[Mapping[str, str]], Answering], env: dict[str, str],
) -> None:
    env = {**env, "SUMMON_PROVIDER_OPENAI_URL": fake.openai_url}
    answering = choose(env)
    [step] = await answering.answer(REQUEST, turn=0)
    assert answering.stand_in == "no_key"
    assert step.text == NO_KEY and step.provider == "mock"
    assert fake.received() == []
    assert (answering.status().usable, answering.status().mode) == (False, "no provider: no key")


def test_the_two_reasons_are_different_sentences() -> None:
    assert NO_KEY != NOT_SWITCHED_ON
    assert "no provider key" in NO_KEY
    assert "AGENTS_LIVE=1" in NOT_SWITCHED_ON and "not switched on" in NOT_SWITCHED_ON


async def test_a_keyless_provider_is_left_out_of_the_chain(
    fake: FakeProvider, fake2: FakeProvider, choose: Callable[[Mapping[str, str]], Answering],
) -> None:
    fake2.queue("anthropic", openai_text("unused"))
    fake.queue("openai", openai_text("from the keyed one"))
    env = {"SUMMON_PROVIDERS": "anthropic,openai", "AGENTS_LIVE": "1",
           "SUMMON_PROVIDER_ANTHROPIC_URL": fake2.anthropic_url,
           "SUMMON_PROVIDER_OPENAI_URL": fake.openai_url, "SUMMON_PROVIDER_OPENAI_KEY": "sk-live"}
    answering = choose(env)
    [step] = await answering.answer(REQUEST, turn=0)
    assert step.text == "from the keyed one" and step.fallback is False
    assert fake2.received() == []
