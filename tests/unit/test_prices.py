"""The price table: the kit's file loads, a deployment's file is laid over it model by model, a bad
entry is refused naming it, and cost = usage × price with each provider's token accounting."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.providers.prices import Price, PriceTable, kit_prices, load_prices, parse_prices
from engine.providers.translate import Usage, anthropic_usage, openai_usage

HAIKU = Price(input=1e-6, output=5e-6, cache_read=1e-7, cache_write=1.25e-6)


def test_the_kit_table_loads_and_prices_the_usual_models() -> None:
    table = kit_prices()
    assert table.version
    for provider, model in [("openai", "gpt-4o-mini"), ("anthropic", "claude-haiku-4-5"),
                            ("anthropic", "claude-sonnet-4-5"), ("openrouter", "openai/gpt-4o-mini")]:
        price = table.price(provider, model)
        assert price is not None and price.input > 0 and price.output > price.input, (provider, model)


def test_anthropic_cost_counts_input_cache_reads_writes_and_output() -> None:
    usage = anthropic_usage({"input_tokens": 100, "cache_read_input_tokens": 5000,
                             "cache_creation_input_tokens": 2000, "output_tokens": 30})
    assert HAIKU.cost(usage) == pytest.approx(100 * 1e-6 + 5000 * 1e-7 + 2000 * 1.25e-6 + 30 * 5e-6)


def test_openai_cost_does_not_charge_cached_tokens_twice() -> None:
    usage = openai_usage({"prompt_tokens": 1200, "completion_tokens": 10,
                          "prompt_tokens_details": {"cached_tokens": 1000}})
    price = Price(input=2e-6, output=8e-6, cache_read=5e-7)
    assert price.cost(usage) == pytest.approx(200 * 2e-6 + 1000 * 5e-7 + 10 * 8e-6)


def test_missing_cache_rates_are_charged_at_the_input_rate() -> None:
    assert Price(input=1e-6, output=0).cost(Usage(input=1, cache_read=10, cache_write=100)) == pytest.approx(111e-6)


def test_lookup_by_name_then_kind_then_undated() -> None:
    table = PriceTable({("anthropic", "claude-haiku-4-5"): HAIKU, ("work", "gpt-4o-mini"): Price(input=1, output=1)})
    assert table.price("anthropic", "claude-haiku-4-5-20251001") == HAIKU  # a dated id, undated
    assert table.price("corp-claude", "claude-haiku-4-5", kind="anthropic") == HAIKU  # by kind
    assert table.price("corp-claude", "claude-haiku-4-5") is None
    assert table.price("work", "gpt-4o-mini-2024-07-18") == Price(input=1, output=1)
    assert table.price("local", "llama3", kind="openai") is None
    assert table.cost("local", "llama3", Usage(input=10)) is None  # unpriced is None, not 0


def test_a_deployments_file_replaces_entries_model_by_model(tmp_path: Path) -> None:
    mine = tmp_path / "prices.yaml"
    mine.write_text("version: site-1\nprices:\n  openai:\n    gpt-4o-mini: {input: 1e-5, output: '2e-5'}\n"
                    "  local:\n    llama3: {input: 0, output: 0}\n", encoding="utf-8")
    table = load_prices(str(mine))
    assert table.version == "site-1"
    assert table.price("openai", "gpt-4o-mini") == Price(input=1e-5, output=2e-5)  # YAML's '1e-5' is read too
    assert table.price("local", "llama3") == Price(input=0, output=0)
    assert table.price("anthropic", "claude-haiku-4-5") == kit_prices().price("anthropic", "claude-haiku-4-5")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"prices": {"openai": {"gpt-x": {"input": 1e-6}}}}, "prices.openai.gpt-x: output"),
        ({"prices": {"openai": {"gpt-x": {"input": -1, "output": 1}}}}, "prices.openai.gpt-x: input"),
        ({"prices": {"openai": {"gpt-x": {"input": 1, "output": 1, "cached": 1}}}}, "cached"),
        ({"prices": {"openai": {"gpt-x": {"input": "cheap", "output": 1}}}}, "prices.openai.gpt-x: input"),
        ({"prices": {"openai": ["gpt-x"]}}, "prices.openai must map"),
        ({"price": {}}, "unknown key"),
        (["openai"], "a price table is a mapping"),
    ],
    ids=["missing_output", "negative", "unknown_field", "not_a_number", "not_a_mapping", "unknown_top_key", "a_list"],
)
def test_a_bad_entry_is_refused_naming_it(data: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_prices(data, source="site/prices.yaml")


def test_an_unreadable_deployment_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="SUMMON_PRICES"):
        load_prices(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("prices: [unclosed", encoding="utf-8")
    with pytest.raises(ConfigError, match="not YAML"):
        load_prices(str(bad))
