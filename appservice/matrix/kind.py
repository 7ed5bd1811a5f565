"""What Matrix rooms bring to content (``engine.content.kinds``): content commands are offered in them, the events
a bot may wake on there, the pictures an avatar may name (mxc:// uris), and the words a voice note a bot could
not hear is answered with."""

from __future__ import annotations

from appservice.pictures import MXC
from engine.content.kinds import Kind

ROOMS = Kind(
    "rooms",
    commands=True,
    called="Matrix",
    pictures=MXC,
    # ``room.created``: a room made with the bot in it (its puppet joined within minutes of the creation);
    # ``reaction``: a person reacted to the bot's own line (a keycap on its choices is a press, a stop sign a
    # cancel — neither is this), and only that bot wakes.
    events=("member.joined", "member.left", "room.created", "reaction"),
    strings={
        # A voice note a bot could not hear, answered in words: over the size cap ({mib}), over the length cap
        # ({minutes}), not audio, a link that is not a content URI, or the download or the transcription failed;
        # ``no_words``: it heard nothing; ``refused``: a summons's gate said no where ``### refusals`` has no words;
        # ``slow_down``: over the sender's rate ({per_minute}); ``busy``: every hearing of the process is taken.
        "voice": {"too_large": ("mib",), "too_long": ("minutes",), "not_audio": (), "not_heard": (), "no_words": (),
                  "bad_link": (), "refused": (), "slow_down": ("per_minute",), "busy": ()},
    },
)
