"""What may take a new line before a mention does: ``!cancel``, a room admin's ``!bots``, a press on a bot's
choices, ``!memories``, a ``!command`` (and its typo); with the words the service says back."""
