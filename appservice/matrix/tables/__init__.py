"""Matrix's own tables, each a family reached as ``tx.of(...)``: rooms and members, lines (the room events kept),
the offers of choices, the outbox, room actions."""
