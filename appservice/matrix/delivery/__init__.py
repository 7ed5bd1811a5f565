"""How what the engine says reaches a room: answers rendered, choices offered, the homeserver called, faces and
commands shown, waiting runs' progress lines, the staff told."""
