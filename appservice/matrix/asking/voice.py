"""Voice notes in Matrix (SPEC §12): heard through the site's transcription endpoint, answered in speech.

Hearing. A voice message (``m.audio`` with ``org.matrix.msc3245.voice``) summons a bot when it is a reply to the
bot's line, mentions it (``m.mentions``), or is said in a DM with it (the room's only other readers are ours and
exactly one bot's puppet). Nothing is paid for before every gate (SPEC §15), so in the commit that stores it:
what the event claims (its link, size, length, type), the sender's rate (``speech.hearings_per_minute``), and
every gate a summons makes (``Asking.would_refuse``: the bot's rules, the room's, the person's ceilings and live
runs, the bot's waiting line, the daily cap — with the hearing's worst case counted beside the run's own limit,
as long as its claimed size plays at the floor bit-rate and no longer than the longest note heard, and the
sender's hearings in flight counted as live runs). Then the hearing is held (``voice_hearings``), that worst
case reserved on the sender's ledger, and a ``Transcribe`` remembered, carried out after the commit (``rooms``):
the homeserver's transaction is never held while audio is fetched and heard.

Carrying it out, at most ``speech.hearings_at_once`` at a time in a process: the file is fetched through
authenticated media as the bot (no further than the size cap), sniffed, and bounded (``audio.bound``: measured
for Ogg Opus and PCM WAV, by its bytes over a floor bit-rate for anything else — never the sender's word); then
the marker is committed (``calling``, the reservation set to the note's own bound — raised only if the gates
still pass with it) and the call made; its outcome is recorded as a paid call whatever came of it, the
reservation settled to it, the transcript stored as the line's ``said`` (so every context shows the words) and
the bot asked with it. A note is never transcribed
twice: a retry finds the marker — heard: it asks with the stored words; being called when its attempt died: it
is not called again, but recorded at its worst case and the person told it was not heard. Every refusal is
answered in the site's words (``### refusals`` as a typed question's are, else ``### voice``), never a crash or
silence; a voice note nobody transcribed reads as ``### context`` ``not_transcribed`` to a bot.

Speaking. A bot with ``voice:`` answers a voice note in speech as well as in text: its delivery queues the
text, then a *speak* row (``SPEAK``) the outbox turns into a voice message as it sends it — said by the speech
endpoint, uploaded as the bot, and posted as ``m.audio`` + ``org.matrix.msc3245.voice`` with its duration and
waveform. No endpoint, a fallen one (``Speech.fallen``) or one failing now: the row is dropped, the text stands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from appservice.matrix.asking.asking import Asking
from appservice.matrix.asking.voice_claims import VOICE_WORDS, claimed_bytes, claimed_refusal, media_parts
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.delivery.render import answer_content
from appservice.matrix.errors import MatrixError
from appservice.matrix.inbound.followups import ATTEMPT_SECONDS, Followup, Transcribe
from appservice.matrix.inbound.mentions import named_bots
from appservice.matrix.inbound.said import Line, read_event
from appservice.matrix.ours import Ours
from appservice.matrix.tables.lines import LineTables
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from appservice.matrix.voice_tables import HearingState, StoredNote, VoiceTables
from appservice.speech import audio
from appservice.speech.endpoints import Speech
from engine.content import Bot, Registry
from engine.errors import SpeechFailed
from engine.run.refusals import Refused
from engine.run.summon import Summoned
from engine.store import Store, Tx

log = logging.getLogger(__name__)

SPEAK = "org.summon.speak"  # an outbox row's content key: say this text as a voice message, then send it
VOICE = "org.matrix.msc3245.voice"
AUDIO = "org.matrix.msc1767.audio"
EXTENSIONS = {"audio/ogg": "ogg", "audio/opus": "ogg", "audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3",
              "audio/mp4": "m4a", "audio/webm": "webm", "audio/flac": "flac", "audio/aac": "aac"}
# A call begun longer ago than an attempt may last (rooms gives one up at ATTEMPT_SECONDS) is a dead attempt's.
CUT_OFF_SECONDS = ATTEMPT_SECONDS + 15.0
# A note that waits this long for one of the process's hearings is answered in words (busy), not queued for
# longer than its attempt may take.
BUSY_SECONDS = 10.0
RATE_SECONDS = 60.0
# Hearings begun within this long and not yet asked count as their sender's live runs (a given-up one stops).
IN_FLIGHT_SECONDS = 600.0
def _mimetype(note: StoredNote) -> str:
    info = note.content.get("info")
    mimetype = info.get("mimetype") if isinstance(info, Mapping) else None
    return mimetype if isinstance(mimetype, str) and mimetype.startswith("audio/") else "audio/ogg"


class Hearing:
    def __init__(self, store: Store, homeserver: Homeserver, registry: Callable[[], Registry], ours: Ours,
                 asking: Asking, speech: Speech, *, max_bytes: int, max_seconds: float, at_once: int = 4,
                 per_minute: int = 6, floor_kbps: float = audio.FLOOR_BYTES_PER_SECOND * 8 / 1000) -> None:
        self.store = store
        self.homeserver = homeserver
        self._registry = registry
        self.ours = ours
        self.asking = asking
        self.speech = speech
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.per_minute = per_minute
        self.floor_bytes_per_second = floor_kbps * 1000 / 8
        self._at_once = asyncio.Semaphore(at_once)  # this process's hearings: each holds a note while it is heard

    # --- in the appservice transaction -------------------------------------------------------------------

    async def summoned(self, tx: Tx, line: Line) -> Bot | None:
        """The bot a voice note summons: the one it replies to, mentions, or whose DM it is said in."""
        by_user = {b.user_id: b for b in self._registry().bots.values() if b.hears_mentions and "rooms" in b.surfaces}
        if line.reply_to is not None:
            replied = await tx.of(LineTables).sender_of(line.reply_to, line.room_id)
            if replied in by_user:
                return by_user[replied]
        for user_id in named_bots(line, self.ours.puppets()):
            if user_id in by_user:
                return by_user[user_id]
        readers = {r.user_id for r in await tx.of(RoomTables).readers(line.room_id)}
        puppets = [u for u in readers if u in by_user]
        people = [u for u in readers if not self.ours(u)]
        if people == [line.sender] and len(puppets) == 1:
            return by_user[puppets[0]]
        return None

    async def heard(self, tx: Tx, line: Line, followups: list[Followup]) -> bool:
        """A voice note that summons a bot: held and its hearing remembered (carried out after the commit), or
        refused in words. False when it summons nobody (it stays a line, read as not transcribed)."""
        bot = await self.summoned(tx, line)
        if bot is None:
            return False
        if await self.hold(tx, line, bot):
            followups.append(Transcribe(room_id=line.room_id, event_id=line.event_id, bot=bot.slug))
        return True

    async def hold(self, tx: Tx, line: Line, bot: Bot) -> bool:
        """Every gate before anything is fetched or paid for; True when the hearing is held (its worst case
        reserved), False when it is refused (told, and recorded) or was held before."""
        note = await tx.of(VoiceTables).note(line.event_id)
        content = note.content if note is not None else {}
        why = claimed_refusal(content, line.media_url, max_bytes=self.max_bytes, max_seconds=self.max_seconds)
        if why is not None:
            return await self._refuse(tx, line, bot, why)
        # The sender's row first, so their notes are counted one after the other (the gates take it again).
        await tx.people.lock_spender(line.sender)
        notes, slowed = await tx.of(VoiceTables).lately(line.sender, RATE_SECONDS, "slow_down")
        if notes >= self.per_minute:
            log.info("voice note %s refused: %d from its sender in the last minute", line.event_id, notes,
                     extra={"room": line.room_id, "bot": bot.slug, "asker": line.sender})
            # Told once a minute: a flood is not answered note by note.
            return await self._refuse(tx, line, bot, "slow_down", tell=slowed == 0)
        if not self.speech.settings.hears:
            return await self._refuse(tx, line, bot, "not_heard")
        # What the call may cost at worst, before the file is seen: as long as its claimed size plays at the floor
        # bit-rate, no longer than the longest note heard. (Should it play longer, the gates are asked again.)
        worst = self.speech.transcription_usd(min(self.max_seconds, claimed_bytes(content, self.max_bytes)
                                                  / self.floor_bytes_per_second))
        in_flight = await tx.of(VoiceTables).in_flight(line.sender, IN_FLIGHT_SECONDS)
        refused = await self.asking.would_refuse(tx, line, bot, also_reserve=worst, also_live=in_flight, tell=False)
        if refused is not None:
            if await tx.of(VoiceTables).refuse(line.event_id, room_id=line.room_id, sender=line.sender, bot=bot.slug,
                                     why=refused.reason):
                await self._say_refused(tx, line, bot, refused)
            return False
        held = await tx.of(VoiceTables).hold(line.event_id, room_id=line.room_id, sender=line.sender, bot=bot.slug, usd=worst)
        if held:
            log.info("voice note %s held (%.6f USD at worst)", line.event_id, worst,
                     extra={"room": line.room_id, "bot": bot.slug, "asker": line.sender})
        return held

    async def _say_refused(self, tx: Tx, line: Line, bot: Bot, refused: Refused) -> None:
        """A summons's refusal, in ``### refusals`` words where a typed question's is told; whatever those leave
        unsaid (no words for it, nothing to say when), in ours."""
        if not await self.asking.tell_refusal(tx, line, bot.slug, refused):
            await self._tell(tx, line, bot, "refused")

    async def _refuse(self, tx: Tx, line: Line, bot: Bot, why: str, *, tell: bool = True) -> bool:
        log.info("voice note %s not heard: %s", line.event_id, why, extra={"room": line.room_id, "bot": bot.slug})
        first = await tx.of(VoiceTables).refuse(line.event_id, room_id=line.room_id, sender=line.sender, bot=bot.slug, why=why)
        if first and tell:
            await self._tell(tx, line, bot, why if why in VOICE_WORDS else "refused")
        return False

    # --- after the commit ------------------------------------------------------------------------------------

    async def hear(self, job: Transcribe) -> str | None:
        """Carry out a held hearing: fetch, bound, transcribe (once, ever), then ask the bot with its words — or
        say in words why not. None when it is done with; else why it must be tried again later (its call is
        still being made by another attempt). Raises ``StoreError`` (tried again) when the database fails."""
        bot = self._registry().get(job.bot)
        note = await self.store.of(VoiceTables).note(job.event_id)
        line = read_event(note.event()) if note is not None else None
        if bot is None or note is None or line is None:
            log.warning("voice note %s: its bot or its line is gone; not heard", job.event_id,
                        extra={"room": job.room_id})
            await self.store.of(VoiceTables).release(job.event_id, state="failed", why="gone")  # nothing left to hold for
            return None
        hearing = await self.store.of(VoiceTables).hearing(job.event_id, call_seconds=CUT_OFF_SECONDS)
        if hearing is None:
            # Remembered before hearings were held as they were stored: every gate now, before anything is fetched.
            async with self.store.transaction("voice_note_held") as tx:
                if not await self.hold(tx, line, bot):
                    return None
            hearing = await self.store.of(VoiceTables).hearing(job.event_id, call_seconds=CUT_OFF_SECONDS)
            assert hearing is not None
        if hearing.state == "held":
            await self._listen(line, bot, note, hearing.reserved_usd or 0.0)
        elif hearing.state == "calling":
            if not hearing.cut_off:
                return "its transcription is being made by another attempt"
            async with self.store.transaction("voice_note_lost") as tx:
                if await tx.of(VoiceTables).lose(job.event_id, call_seconds=CUT_OFF_SECONDS):
                    log.warning("voice note %s: its transcription was cut off before its answer was recorded; not "
                                "made again (counted at its worst case, %.6f USD)", job.event_id,
                                hearing.reserved_usd or 0.0, extra={"room": job.room_id, "bot": bot.slug})
                    await self._tell(tx, line, bot, "not_heard")
        elif hearing.state == "heard":
            await self._ask(line, bot, note, hearing.heard or "")
        else:
            log.info("voice note %s was heard before (%s); nothing is paid again", job.event_id, hearing.state,
                     extra={"room": job.room_id, "bot": bot.slug})
        return None

    async def _listen(self, line: Line, bot: Bot, note: StoredNote, reserved: float) -> None:
        try:
            async with asyncio.timeout(BUSY_SECONDS):
                await self._at_once.acquire()
        except TimeoutError:
            await self._release(line, bot, "refused", "busy")
            return
        try:
            await self._fetch_and_call(line, bot, note, reserved)
        finally:
            self._at_once.release()

    async def _fetch_and_call(self, line: Line, bot: Bot, note: StoredNote, reserved: float) -> None:
        if line.media_url is None or media_parts(line.media_url) is None:  # held only if not (an older version)
            await self._release(line, bot, "refused", "bad_link")
            return
        try:
            data = await self.homeserver.download(bot.user_id, line.media_url, self.max_bytes)
        except MatrixError as exc:
            log.warning("voice note %s could not be fetched: %s", line.event_id, exc, extra={"room": line.room_id})
            too_large = exc.errcode == "M_TOO_LARGE"
            await self._release(line, bot, "refused" if too_large else "failed", "too_large" if too_large else
                                "not_heard")
            return
        if not audio.sniff(data):
            await self._release(line, bot, "refused", "not_audio")
            return
        # Bounding a hostile file is linear but may take a tenth of a second: off the event loop.
        seconds = await asyncio.to_thread(audio.bound, data, limit=self.max_seconds,
                                          floor_bytes_per_second=self.floor_bytes_per_second)
        if seconds > self.max_seconds:
            await self._release(line, bot, "refused", "too_long")
            return
        worst = self.speech.transcription_usd(seconds)
        # The marker, in its own commit before the paid call: from here on this note is never called again. It
        # holds the call's worst case — more than was held (it plays longer than its claimed size allowed for):
        # only if the gates still pass with it.
        async with self.store.transaction("voice_note_called") as tx:
            if worst > reserved + 1e-9 and not await self._may_hold_more(tx, line, bot, worst):
                return
            called = await tx.of(VoiceTables).call(line.event_id, seconds=seconds, usd=worst)
        if not called:
            log.warning("voice note %s is past being held; not called again", line.event_id,
                        extra={"room": line.room_id})
            return
        mimetype = _mimetype(note)
        try:
            heard = await self.speech.transcribe(data, filename=f"voice.{EXTENSIONS.get(mimetype, 'ogg')}",
                                                 mimetype=mimetype, seconds=seconds)
        except SpeechFailed as exc:
            log.warning("voice note %s could not be transcribed: %s", line.event_id, exc, extra={"room": line.room_id})
            # Sent and unanswered: it may have been billed, so it is counted at its worst case.
            unknown = exc.why == "unknown"
            async with self.store.transaction("voice_note_not_heard") as tx:
                if await tx.of(VoiceTables).settle(line.event_id, outcome="unknown" if unknown else "refused", seconds=seconds,
                                         usd=worst if unknown else 0.0, heard=None, state="failed", why="not_heard"):
                    await self._tell(tx, line, bot, "not_heard")
            return
        async with self.store.transaction("voice_note_heard") as tx:
            settled = await tx.of(VoiceTables).settle(line.event_id, outcome="answered", seconds=heard.seconds,
                                            usd=heard.cost_usd, heard=heard.text,
                                            state="heard" if heard.text else "failed",
                                            why=None if heard.text else "no_words")
            if settled and heard.text:
                await tx.of(VoiceTables).heard(line.event_id, heard.text)
            elif settled:
                await self._tell(tx, line, bot, "no_words")
        if not settled:
            log.warning("voice note %s was answered after its hearing was given up; its worst case stands",
                        line.event_id, extra={"room": line.room_id})
        elif heard.text:
            log.info("voice note %s heard (%d characters, %.1f s, %.6f USD)", line.event_id, len(heard.text),
                     heard.seconds, heard.cost_usd, extra={"room": line.room_id, "bot": bot.slug})
            await self._ask(line, bot, note, heard.text)

    async def _may_hold_more(self, tx: Tx, line: Line, bot: Bot, usd: float) -> bool:
        """Raise the held note's reservation to ``usd`` and ask the gates again (this hearing no longer counted
        among the sender's in flight: it is on the ledger); False, the note let go and told why, when they refuse."""
        await tx.people.lock_spender(line.sender)
        await tx.of(VoiceTables).raise_hold(line.event_id, usd=usd)
        in_flight = await tx.of(VoiceTables).in_flight(line.sender, IN_FLIGHT_SECONDS)
        refused = await self.asking.would_refuse(tx, line, bot, also_live=max(0, in_flight - 1), tell=False)
        if refused is None:
            return True
        if await tx.of(VoiceTables).release(line.event_id, state="refused", why=refused.reason):
            await self._say_refused(tx, line, bot, refused)
        return False

    async def _ask(self, line: Line, bot: Bot, note: StoredNote, text: str) -> None:
        said = replace(line, text=text)
        async with self.store.transaction("voice_note_asked") as tx:
            await tx.of(RoomTables).lock(line.room_id)
            result = await self.asking.ask(tx, said, bot, tell=False)
            if isinstance(result, Summoned) or result.reason == "duplicate":  # asked before (a retried commit)
                await tx.of(VoiceTables).asked(line.event_id, run_id=result.run_id if isinstance(result, Summoned) else None)
                return
            # Something changed since the gates passed (a race, a setting): said in words all the same.
            await tx.of(VoiceTables).asked(line.event_id, run_id=None, refused=result.reason)
            await self._say_refused(tx, line, bot, result)

    async def _release(self, line: Line, bot: Bot, state: HearingState, why: str) -> None:
        async with self.store.transaction("voice_note_released") as tx:
            if await tx.of(VoiceTables).release(line.event_id, state=state, why=why):
                log.info("voice note %s not heard: %s", line.event_id, why,
                         extra={"room": line.room_id, "bot": bot.slug})
                await self._tell(tx, line, bot, why)

    async def _tell(self, tx: Tx, line: Line, bot: Bot, why: str) -> None:
        words = self._registry().strings.get("voice", why)
        if not words:
            log.info("voice note %s not heard (%s); the site has no words for it", line.event_id, why)
            return
        text = words.format(mib=f"{self.max_bytes / 1024 / 1024:g}", minutes=f"{self.max_seconds / 60:g}",
                            per_minute=self.per_minute)
        content = answer_content(text, thread_root=line.thread_root, reply_to=line.event_id, mention=line.sender)
        await tx.of(OutboxTables).enqueue(txn_id=f"voice.refused.{line.event_id}", room_id=line.room_id, sender=bot.user_id,
                                event_type="m.room.message", content=content)



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
            await self.store.of(VoiceTables).record_call(run_id, "speech", len(speak["text"]), spoken.cost_usd)
        return voiced
