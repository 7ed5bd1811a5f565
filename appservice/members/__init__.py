"""Member bots in Matrix (docs/member-bots.md): the builder's tools, each bot's own room, its editions."""
