"""What a bot remembers of a person (SPEC §11), read by the worker from the run: the person's earlier questions
(``memory: person``) and, with ``person+recall``, what they told the bot, found by meaning."""
