"""appservice.puppet_prefix: every puppet is @<prefix><slug>, the registration's namespace follows, and what is
ours in a room is read by the same prefix."""

from __future__ import annotations

import re

import pytest

from appservice.config import parse_config, registration
from appservice.kinds import KINDS
from appservice.matrix.ours import in_our_namespace
from engine.content.compile import compile_bot
from engine.errors import ConfigError
from tests.unit.test_config import minimal, with_

HELPER = "---\nname: Helper\n---\nYou help.\n"


def test_the_default_prefix_is_bot_() -> None:
    config = parse_config(minimal(), {})
    assert config.appservice.puppet_prefix == "bot_"
    assert {"exclusive": True, "regex": "@bot_.*:localhost"} in registration(config)["namespaces"]["users"]


def test_a_custom_prefix_makes_the_puppets_and_the_registration() -> None:
    config = parse_config(with_("appservice.puppet_prefix", "ai."), {})
    users = registration(config)["namespaces"]["users"]
    assert {"exclusive": True, "regex": r"@ai\..*:localhost"} in users
    bots = re.compile(users[0]["regex"])
    assert bots.fullmatch("@ai.helper:localhost")
    assert not bots.fullmatch("@aiXhelper:localhost") and not bots.fullmatch("@bot_helper:localhost")
    bot = compile_bot("bots/helper.md", HELPER, kinds=KINDS, server_name="localhost", puppet_prefix="ai.")
    assert not isinstance(bot, list) and bot.user_id == "@ai.helper:localhost"


@pytest.mark.parametrize("bad", ["", "Bot_", "bot prefix", "@bot_", "bot:", "x" * 33])
def test_a_prefix_that_is_no_localpart_start_is_refused_in_one_line(bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(with_("appservice.puppet_prefix", bad), {})
    message = str(caught.value)
    assert message.startswith("config: appservice.puppet_prefix: ") and "\n" not in message


def test_what_is_ours_follows_the_prefix() -> None:
    ours = {"server_name": "hs", "service_user": "@summon:hs", "puppet_prefix": "ai_"}
    assert in_our_namespace("@ai_helper:hs", **ours)
    assert in_our_namespace("@summon:hs", **ours)
    assert not in_our_namespace("@bot_helper:hs", **ours)  # another appservice's, under the old default
    assert not in_our_namespace("@ai_helper:elsewhere", **ours)


def test_a_slug_too_long_for_the_prefix_is_refused() -> None:
    slug = "a" * (255 - len("@:localhost") - len("bot_") - 1)
    assert not isinstance(compile_bot(f"bots/{slug}.md", HELPER, kinds=KINDS, server_name="localhost"), list)
    refused = compile_bot(f"bots/{slug}.md", HELPER, kinds=KINDS, server_name="localhost", puppet_prefix="longer_prefix_")
    assert isinstance(refused, list) and "too long for a Matrix user id" in refused[0].message
