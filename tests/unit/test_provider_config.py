"""Providers from the environment, and the buying rule, as pure decisions (no server here; the
end-to-end rule, asserting what reached a server, is in tests/providers/test_buying.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from appservice.config import provider_settings, providers_from_env
from engine.clock import FakeClock
from engine.core.permits import ProviderLimits
from engine.errors import ConfigError
from engine.providers.anthropic import AnthropicAdapter
from engine.providers.base import DEFAULT_TIMEOUT
from engine.providers.config import (
    ProviderConfig,
    adapter_for,
    choose_answerer,
    env_prefix,
    stand_in_reason,
)
from engine.providers.openai import OpenAIAdapter


def test_an_ordered_list_of_providers() -> None:
    env = {
        "SUMMON_PROVIDERS": " OpenRouter , anthropic,local-llm",
        "SUMMON_PROVIDER_OPENROUTER_URL": "https://openrouter.ai/api/v1",
        "SUMMON_PROVIDER_OPENROUTER_KEY": "sk-or",
        "SUMMON_PROVIDER_ANTHROPIC_KEY": "sk-ant",
        "SUMMON_PROVIDER_LOCAL_LLM_URL": "http://127.0.0.1:11434/v1",
        "SUMMON_PROVIDER_LOCAL_LLM_MODEL": "llama3.2",
        "SUMMON_PROVIDER_LOCAL_LLM_TIMEOUT": "30",
    }
    assert providers_from_env(env) == [
        ProviderConfig("openrouter", "openai", url="https://openrouter.ai/api/v1", key="sk-or"),
        ProviderConfig("anthropic", "anthropic", key="sk-ant"),
        ProviderConfig("local-llm", "openai", url="http://127.0.0.1:11434/v1", model="llama3.2", timeout=30.0),
    ]


def test_the_kind_is_set_explicitly_or_defaults_by_name() -> None:
    env = {"SUMMON_PROVIDERS": "claude,anthropic,openai", "SUMMON_PROVIDER_CLAUDE_KIND": "Anthropic"}
    assert [p.kind for p in providers_from_env(env)] == ["anthropic", "anthropic", "openai"]
    assert all(p.timeout == DEFAULT_TIMEOUT and p.key is None for p in providers_from_env(env))


def test_no_providers_listed_is_an_empty_list() -> None:
    assert providers_from_env({}) == []
    assert providers_from_env({"SUMMON_PROVIDERS": " , "}) == []


def test_the_key_is_never_in_a_repr() -> None:
    assert "sk-secret" not in repr(ProviderConfig("openai", "openai", key="sk-secret"))


def test_env_prefix() -> None:
    assert env_prefix("local-llm") == "SUMMON_PROVIDER_LOCAL_LLM_"
    assert env_prefix("openrouter") == "SUMMON_PROVIDER_OPENROUTER_"


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"SUMMON_PROVIDERS": "groq", "SUMMON_PROVIDER_GROQ_KIND": "gemini"}, "SUMMON_PROVIDER_GROQ_KIND"),
        ({"SUMMON_PROVIDERS": "groq", "SUMMON_PROVIDER_GROQ_URL": "api.groq.com"}, "SUMMON_PROVIDER_GROQ_URL"),
        ({"SUMMON_PROVIDERS": "groq", "SUMMON_PROVIDER_GROQ_TIMEOUT": "soon"}, "SUMMON_PROVIDER_GROQ_TIMEOUT"),
        ({"SUMMON_PROVIDERS": "groq", "SUMMON_PROVIDER_GROQ_TIMEOUT": "0"}, "SUMMON_PROVIDER_GROQ_TIMEOUT"),
        ({"SUMMON_PROVIDERS": "openai,openai"}, "listed twice"),
        ({"SUMMON_PROVIDERS": "a-b,a_b"}, "listed twice"),
        ({"SUMMON_PROVIDERS": "my provider"}, "not a provider name"),
    ],
    ids=["unknown_kind", "url_without_scheme", "timeout_not_a_number", "timeout_zero", "duplicate",
         "same_env_prefix", "bad_name"],
)
def test_a_bad_setting_names_its_key(env: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        providers_from_env(env)


KEYED = [ProviderConfig("openai", "openai", key="sk")]
UNKEYED = [ProviderConfig("openai", "openai")]


@pytest.mark.parametrize(
    ("env", "providers", "reason"),
    [
        ({"AGENTS_LIVE": "1"}, KEYED, None),
        ({"AGENTS_LIVE": "true"}, KEYED, None),
        ({}, KEYED, "not_switched_on"),
        ({"AGENTS_LIVE": "0"}, KEYED, "not_switched_on"),
        ({"AGENTS_LIVE": "1", "SUMMON_AGENT_MOCK": "1"}, KEYED, "chosen"),
        ({"AGENTS_LIVE": "1", "SUMMON_AGENT_MOCK": "0"}, KEYED, None),
        ({"AGENTS_LIVE": "1"}, UNKEYED, "no_key"),
        ({"AGENTS_LIVE": "1"}, [], "no_key"),
        ({}, [], "no_key"),
        ({"SUMMON_AGENT_MOCK": "1"}, [], "chosen"),
    ],
    ids=["live", "live_true", "live_unset", "live_0", "mock_forced", "mock_0", "keyless_provider",
         "no_provider", "nothing", "mock_and_no_key"],
)
def test_stand_in_reason(env: dict[str, str], providers: list[ProviderConfig], reason: str | None) -> None:
    assert stand_in_reason(replace(provider_settings(env), providers=tuple(providers))) == reason


def test_each_kind_gets_its_adapter() -> None:
    clock = FakeClock()
    assert isinstance(adapter_for(ProviderConfig("x", "anthropic", key="k"), clock), AnthropicAdapter)
    assert isinstance(adapter_for(ProviderConfig("x", "openai", key="k"), clock), OpenAIAdapter)


async def test_choose_answerer_builds_the_chain_in_order_with_only_keyed_providers() -> None:
    env = {"SUMMON_PROVIDERS": "openrouter,spare,anthropic", "AGENTS_LIVE": "1",
           "SUMMON_PROVIDER_OPENROUTER_KEY": "a", "SUMMON_PROVIDER_ANTHROPIC_KEY": "b"}
    answering = choose_answerer(provider_settings(env), FakeClock())
    try:
        assert answering.buying and answering.chain is not None
        assert [(a.name, a.kind) for a in answering.chain.adapters] == [("openrouter", "openai"), ("anthropic", "anthropic")]
        assert answering.chain.prices.price("anthropic", "claude-haiku-4-5") is not None  # the kit's prices
    finally:
        await answering.aclose()


def test_a_bad_price_file_stops_start_up() -> None:
    env = {"SUMMON_PROVIDERS": "openai", "SUMMON_PROVIDER_OPENAI_KEY": "k", "AGENTS_LIVE": "1",
           "SUMMON_PRICES": "/nonexistent/prices.yaml"}
    with pytest.raises(ConfigError, match="SUMMON_PRICES"):
        choose_answerer(provider_settings(env), FakeClock())


def test_a_providers_limits_come_from_the_environment() -> None:
    env = {"SUMMON_PROVIDERS": "openrouter,anthropic", "SUMMON_PROVIDER_OPENROUTER_MAX_IN_FLIGHT": "20",
           "SUMMON_PROVIDER_OPENROUTER_RPM": "500", "SUMMON_PROVIDER_OPENROUTER_TPM": "200000",
           "SUMMON_PROVIDER_OPENROUTER_WINDOW": "10"}
    first, second = providers_from_env(env)
    assert first.limits == ProviderLimits(max_in_flight=20, requests_per_minute=500, tokens_per_minute=200_000,
                                          window_seconds=10.0)
    assert first.limits.limited and first.limits.per_window(500) == 83  # a 10-second window's share
    assert second.limits == ProviderLimits() and not second.limits.limited


@pytest.mark.parametrize(("key", "value"), [("MAX_IN_FLIGHT", "0"), ("RPM", "lots"), ("TPM", "-5"), ("RPM", "2.5"),
                                            ("WINDOW", "0.5"), ("WINDOW", "120"), ("WINDOW", "soon")])
def test_a_bad_limit_names_its_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"SUMMON_PROVIDER_GROQ_{key}"):
        providers_from_env({"SUMMON_PROVIDERS": "groq", f"SUMMON_PROVIDER_GROQ_{key}": value})


def test_a_provider_declared_free_prices_every_model_at_nothing_and_needs_no_key() -> None:
    from engine.providers.prices import PriceTable

    env = {"SUMMON_PROVIDERS": "local", "SUMMON_PROVIDER_LOCAL_URL": "http://127.0.0.1:11434/v1",
           "SUMMON_PROVIDER_LOCAL_FREE": "1"}
    [local] = providers_from_env(env)
    assert local.free and local.key  # the SDK wants a string; a local model never checks it
    table = PriceTable({}, free=frozenset({"local"}))
    price = table.price("local", "llama3.2")
    assert price is not None and (price.input, price.output) == (0, 0)
    assert table.price("openai", "llama3.2") is None
    with pytest.raises(ConfigError, match="SUMMON_PROVIDER_LOCAL_FREE: 'maybe' is not 1 or 0"):
        providers_from_env({**env, "SUMMON_PROVIDER_LOCAL_FREE": "maybe"})


async def test_a_provider_whose_timeout_leaves_its_fallback_no_time_is_said_at_start(
        caplog: pytest.LogCaptureFixture) -> None:
    """make chaos, provider-hanging: a primary that never answers took the whole patience (its timeout above it),
    and every run failed instead of falling back. It is said, once, when the answerer is chosen."""
    env = {"SUMMON_PROVIDERS": "primary,backup", "AGENTS_LIVE": "1", "SUMMON_PROVIDER_PRIMARY_FREE": "1",
           "SUMMON_PROVIDER_BACKUP_FREE": "1", "SUMMON_PROVIDER_PRIMARY_URL": "http://127.0.0.1:9/v1",
           "SUMMON_PROVIDER_BACKUP_URL": "http://127.0.0.1:9/v1"}
    for timeout, patience, said in (("15", 6.0, True), ("3", 6.0, False), ("120", 60.0, True)):
        caplog.clear()
        answerer = choose_answerer(provider_settings({**env, "SUMMON_PROVIDER_PRIMARY_TIMEOUT": timeout}), FakeClock(),
                                   patience=patience)
        await answerer.aclose()
        warned = [r.getMessage() for r in caplog.records if "leaves the providers after it no time" in r.getMessage()]
        assert bool(warned) == said, (timeout, patience, warned)
        if said:
            assert warned[0].startswith("provider primary:") and "SUMMON_PROVIDER_PRIMARY_TIMEOUT" in warned[0]
