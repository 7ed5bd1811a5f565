"""Voice notes in Matrix (SPEC §12): heard through the site's transcription endpoint, answered in speech.

Hearing. A voice message (``m.audio`` with ``org.matrix.msc3245.voice``) summons a bot when it is a reply to the
bot's line, mentions it (``m.mentions``), or is said in a DM with it (the room's only other readers are ours and
exactly one bot's puppet). It is stored like any line, and its summons waits for its words: a ``Transcribe``
is remembered in the same commit and carried out after it (``rooms``), so the homeserver's transaction is never
held while audio is fetched and heard. Carrying it out: the caps are checked on what the event claims (size,
length, mimetype), the file is fetched through authenticated media as the bot (no further than the size cap),
sniffed and measured again, and transcribed; the transcript becomes the line's ``said`` (so every context shows
the words) and the bot is asked with it — the call recorded on the run with its cost. Anything that goes wrong
is answered in the site's words (``### voice``), never a crash; a voice note nobody transcribed reads as
``### context`` ``not_transcribed`` to a bot.

Speaking. A bot with ``voice:`` answers a voice note in speech as well as in text: its delivery queues the
text, then a *speak* row (``SPEAK``) the outbox turns into a voice message as it sends it — said by the speech
endpoint, uploaded as the bot, and posted as ``m.audio`` + ``org.matrix.msc3245.voice`` with its duration and
waveform. No endpoint, a fallen one (``Speech.fallen``) or one failing now: the row is dropped, the text stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from appservice.matrix.asking import Asking
from appservice.matrix.followups import Followup, Transcribe
from appservice.matrix.homeserver import Homeserver
from appservice.matrix.mentions import named_bots
from appservice.matrix.ours import Ours
from appservice.matrix.render import answer_content
from appservice.matrix.said import Line, read_event
from engine.content import Bot, Registry
from engine.errors import MatrixError, SpeechFailed
from engine.run.summon import Summoned
from engine.speech import audio
from engine.speech.endpoints import Speech
from engine.store import Store, Tx

log = logging.getLogger(__name__)

SPEAK = "org.summon.speak"  # an outbox row's content key: say this text as a voice message, then send it
VOICE = "org.matrix.msc3245.voice"
AUDIO = "org.matrix.msc1767.audio"
EXTENSIONS = {"audio/ogg": "ogg", "audio/opus": "ogg", "audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3",
              "audio/mp4": "m4a", "audio/webm": "webm", "audio/flac": "flac", "audio/aac": "aac"}


class Hearing:
    def __init__(self, store: Store, homeserver: Homeserver, registry: Callable[[], Registry], ours: Ours,
                 asking: Asking, speech: Speech, *, max_bytes: int, max_seconds: float,
                 scripts: Callable[[Mapping[str, Any]], list[dict[str, Any]] | None] | None = None) -> None:
        self.store = store
        self.homeserver = homeserver
        self._registry = registry
        self.ours = ours
        self.asking = asking
        self.speech = speech
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.scripts = scripts

    # --- in the appservice transaction -------------------------------------------------------------------

    async def summoned(self, tx: Tx, line: Line) -> Bot | None:
        """The bot a voice note summons: the one it replies to, mentions, or whose DM it is said in."""
        by_user = {b.user_id: b for b in self._registry().bots.values() if b.hears_mentions and "rooms" in b.surfaces}
        if line.reply_to is not None:
            replied = await tx.lines.sender_of(line.reply_to, line.room_id)
            if replied in by_user:
                return by_user[replied]
        for user_id in named_bots(line, self.ours.puppets()):
            if user_id in by_user:
                return by_user[user_id]
        readers = {r.user_id for r in await tx.rooms.readers(line.room_id)}
        puppets = [u for u in readers if u in by_user]
        people = [u for u in readers if not self.ours(u)]
        if people == [line.sender] and len(puppets) == 1:
            return by_user[puppets[0]]
        return None

    async def heard(self, tx: Tx, line: Line, followups: list[Followup]) -> bool:
        """A voice note that summons a bot: its hearing remembered (carried out after the commit). False when it
        summons nobody (it stays a line, read as not transcribed)."""
        bot = await self.summoned(tx, line)
        if bot is None:
            return False
        followups.append(Transcribe(room_id=line.room_id, event_id=line.event_id, bot=bot.slug))
        return True

    # --- after the commit ------------------------------------------------------------------------------------

    async def hear(self, job: Transcribe) -> None:
        """Fetch, check and transcribe the voice note, then ask the bot with its words — or say in words why not.
        Raises only ``StoreError`` (the action is tried again) once the database cannot be reached."""
        registry = self._registry()
        bot = registry.get(job.bot)
        note = await self.store.voice.note(job.event_id)
        if bot is None or note is None:
            log.warning("voice note %s: its bot or its line is gone; not heard", job.event_id,
                        extra={"room": job.room_id})
            return
        event = note.event()
        line = read_event(event)
        if line is None or line.media_url is None:
            await self._tell(line, bot, "not_audio")
            return
        info = note.content.get("info")
        info = info if isinstance(info, Mapping) else {}
        claimed_size, claimed_ms, mimetype = info.get("size"), info.get("duration"), str(info.get("mimetype") or "")
        if isinstance(claimed_size, int) and claimed_size > self.max_bytes:
            await self._tell(line, bot, "too_large")
            return
        if isinstance(claimed_ms, int | float) and claimed_ms / 1000 > self.max_seconds:
            await self._tell(line, bot, "too_long")
            return
        if mimetype and not mimetype.startswith("audio/"):
            await self._tell(line, bot, "not_audio")
            return
        try:
            data = await self.homeserver.download(bot.user_id, line.media_url, self.max_bytes)
        except MatrixError as exc:
            log.warning("voice note %s could not be fetched: %s", job.event_id, exc, extra={"room": job.room_id})
            await self._tell(line, bot, "too_large" if exc.errcode == "M_TOO_LARGE" else "not_heard")
            return
        if not audio.sniff(data):
            await self._tell(line, bot, "not_audio")
            return
        seconds = audio.seconds(data) or (claimed_ms / 1000 if isinstance(claimed_ms, int | float) else None)
        if seconds is not None and seconds > self.max_seconds:
            await self._tell(line, bot, "too_long")
            return
        try:
            heard = await self.speech.transcribe(data, filename=f"voice.{EXTENSIONS.get(mimetype, 'ogg')}",
                                                 mimetype=mimetype or "audio/ogg", seconds=seconds)
        except SpeechFailed as exc:
            log.warning("voice note %s could not be transcribed: %s", job.event_id, exc, extra={"room": job.room_id})
            await self._tell(line, bot, "not_heard")
            return
        if not heard.text:
            await self._tell(line, bot, "no_words")
            return
        said = replace(line, text=heard.text)
        script = self.scripts(event) if self.scripts is not None else None
        async with self.store.transaction("voice_note_heard") as tx:
            await tx.rooms.lock(line.room_id)
            await tx.voice.heard(job.event_id, heard.text)
            result = await self.asking.ask(tx, said, bot, script=script)
            if isinstance(result, Summoned):
                await tx.voice.record_call(result.run_id, "transcription", seconds or 0.0, heard.cost_usd)
        log.info("voice note %s heard (%d characters)", job.event_id, len(heard.text),
                 extra={"room": job.room_id, "bot": bot.slug})

    async def _tell(self, line: Line | None, bot: Bot, why: str) -> None:
        if line is None:
            return
        words = self._registry().strings.get("voice", why)
        if not words:
            log.info("voice note %s not heard (%s); the site has no words for it", line.event_id, why)
            return
        text = words.format(mib=f"{self.max_bytes / 1024 / 1024:g}", minutes=f"{self.max_seconds / 60:g}")
        content = answer_content(text, thread_root=line.thread_root, reply_to=line.event_id, mention=line.sender)
        async with self.store.transaction("voice_note_refused") as tx:
            await tx.outbox.enqueue(txn_id=f"voice.refused.{line.event_id}", room_id=line.room_id,
                                    sender=bot.user_id, event_type="m.room.message", content=content)


class Speaking:
    """Turns a speak row into a voice message as the outbox sends it."""

    def __init__(self, store: Store, homeserver: Homeserver, speech: Speech) -> None:
        self.store = store
        self.homeserver = homeserver
        self.speech = speech

    async def voiced(self, run_id: int | None, sender: str, content: dict[str, Any]) -> dict[str, Any] | None:
        """The voice message for a speak row's content, or None: the text goes alone (no endpoint, fallen, or
        failing now). Raises ``MatrixError`` when the upload fails (the outbox tries the row again)."""
        speak = content.get(SPEAK)
        if not isinstance(speak, Mapping) or not isinstance(speak.get("text"), str):
            return None
        voice = speak.get("voice")
        spoken = await self.speech.speak(speak["text"], voice=voice if isinstance(voice, str) else None)
        if spoken is None:
            return None
        ext = EXTENSIONS.get(spoken.mimetype, "ogg")
        mxc = await self.homeserver.upload(sender, spoken.audio, spoken.mimetype, f"answer.{ext}")
        seconds = audio.seconds(spoken.audio) or 0.0
        ms = round(seconds * 1000)
        voiced: dict[str, Any] = {
            "msgtype": "m.audio", "body": "Voice message", "url": mxc,
            "info": {"mimetype": spoken.mimetype, "size": len(spoken.audio), "duration": ms},
            AUDIO: {"duration": ms, "waveform": audio.waveform(spoken.audio)},
            VOICE: {},
        }
        for key in ("m.relates_to", "m.mentions"):
            if key in content:
                voiced[key] = content[key]
        if run_id is not None:
            await self.store.voice.record_call(run_id, "speech", len(speak["text"]), spoken.cost_usd)
        return voiced
