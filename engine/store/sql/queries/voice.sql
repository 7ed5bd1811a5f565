-- Voice notes heard and answers said (engine/store/voice.py; SPEC §12, §15; migrations 0041, 0055).

-- name: voice_note
-- Stored line $1 as it arrived (what hearing a voice note needs of it).
SELECT event_id, room_id, sender, event_type, ts, content, thread_root, reply_to
  FROM room_events WHERE event_id = $1;

-- name: voice_note_heard
-- Voice note $1 now says $2: its transcript, so every context shows the words.
UPDATE room_events SET said = $2 WHERE event_id = $1;

-- name: voice_hearing
-- Voice note $1's hearing: how far it got (the marker that it is never transcribed twice).
SELECT h.event_id, h.room_id, h.sender, h.bot, h.state, h.why, h.seconds::float8 AS seconds, h.heard, h.run_id,
       l.usd::float8 AS reserved_usd, h.called_at < now() - make_interval(secs => $2) AS cut_off
  FROM voice_hearings h LEFT JOIN spend_ledger l ON l.id = h.ledger_id
 WHERE h.event_id = $1;

-- name: voice_hearings_lately
-- Sender $1's voice notes in the last $2 seconds: all of them (their rate), and those refused for $3 (told once).
SELECT count(*) AS notes, count(*) FILTER (WHERE why = $3) AS refused
  FROM voice_hearings WHERE sender = $1 AND created_at > now() - make_interval(secs => $2);

-- name: voice_hearings_in_flight
-- Sender $1's hearings still on their way to asking (held, being heard, heard), begun in the last $2 seconds:
-- they count as live runs when the sender asks again.
SELECT count(*) FROM voice_hearings
 WHERE sender = $1 AND state IN ('held', 'calling', 'heard') AND created_at > now() - make_interval(secs => $2);

-- name: begin_voice_hearing
-- Voice note $1 (room $2, sender $3, for bot $4) begins its hearing in state $5 ('held', or 'refused' for $6);
-- nothing when it has one (a replayed transaction, a racing retry).
INSERT INTO voice_hearings (event_id, room_id, sender, bot, state, why) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: reserve_voice_hearing
-- Voice note $1's hearing holds $2 USD on its sender's ledger for bot $3 (what its call may cost at worst): a
-- row of its own, counted by their ceilings and the deployment's cap until it is settled.
WITH held AS (
    INSERT INTO spend_ledger (who, bot, run_id, usd)
    SELECT sender, $3, NULL, $2 FROM voice_hearings WHERE event_id = $1 AND state = 'held' AND ledger_id IS NULL
    RETURNING id
)
UPDATE voice_hearings h SET ledger_id = held.id FROM held WHERE h.event_id = $1;

-- name: raise_voice_hearing
-- Voice note $1, still held, needs $2 USD reserved (it plays longer than its claimed size allowed for): its
-- reservation raised to that, in the transaction that asks the gates again.
UPDATE spend_ledger l SET usd = $2
  FROM voice_hearings h
 WHERE h.event_id = $1 AND h.state = 'held' AND l.id = h.ledger_id AND l.reserved;

-- name: call_voice_hearing
-- Voice note $1 is about to be transcribed: the marker set before the paid call, in its own commit, with the
-- note's duration bound ($2 seconds) and the reservation lowered to what that may cost ($3 USD). 1 when this
-- hearing may call; 0 when it is past held (it was called before, or refused): it must not call again.
WITH calling AS (
    UPDATE voice_hearings SET state = 'calling', called_at = now(), seconds = $2
     WHERE event_id = $1 AND state = 'held'
    RETURNING ledger_id
), lowered AS (
    UPDATE spend_ledger l SET usd = $3 FROM calling WHERE l.id = calling.ledger_id AND l.reserved RETURNING l.id
)
SELECT count(*) AS called FROM calling;

-- name: settle_voice_hearing
-- Voice note $1's call came back (outcome $2: answered, refused, unknown): recorded as a paid call ($3 seconds,
-- $4 USD), its reservation settled to that, the hearing now $6 (why $7) with the words $5. 1 when settled; 0
-- when the hearing was no longer being called (a retry gave it up as lost meanwhile: the worst case stands).
WITH h AS (
    UPDATE voice_hearings SET state = $6, why = $7, heard = $5
     WHERE event_id = $1 AND state = 'calling'
    RETURNING event_id, ledger_id
), call AS (
    INSERT INTO speech_calls (run_id, event_id, kind, units, cost_usd, outcome)
    SELECT NULL, event_id, 'transcription', $3, $4, $2 FROM h
    ON CONFLICT (event_id) WHERE kind = 'transcription' DO NOTHING
    RETURNING id
), settled AS (
    UPDATE spend_ledger l SET usd = $4, spent = $4, drawn = 0, reserved = false FROM h WHERE l.id = h.ledger_id
    RETURNING l.id
)
SELECT count(*) AS settled FROM h;

-- name: lose_voice_hearing
-- Voice note $1's call was begun more than $2 seconds ago and its answer never recorded (the process died, the
-- attempt was cut off): it is not made again. Recorded as a call of unknown outcome at its worst case (what is
-- reserved for it), settled so, the hearing lost. 1 when it was given up here.
WITH h AS (
    UPDATE voice_hearings SET state = 'lost', why = 'lost'
     WHERE event_id = $1 AND state = 'calling' AND called_at < now() - make_interval(secs => $2)
    RETURNING event_id, ledger_id, seconds
), call AS (
    INSERT INTO speech_calls (run_id, event_id, kind, units, cost_usd, outcome)
    SELECT NULL, h.event_id, 'transcription', coalesce(h.seconds, 0), coalesce(l.usd, 0), 'unknown'
      FROM h LEFT JOIN spend_ledger l ON l.id = h.ledger_id
    ON CONFLICT (event_id) WHERE kind = 'transcription' DO NOTHING
    RETURNING id
), settled AS (
    UPDATE spend_ledger l SET spent = l.usd, drawn = 0, reserved = false FROM h WHERE l.id = h.ledger_id
    RETURNING l.id
)
SELECT count(*) AS lost FROM h;

-- name: release_voice_hearing
-- Voice note $1 is not heard after all, before anything was paid (not audio, too long, not fetched): the hearing
-- $2 (why $3) and its reservation let go (settled at nothing). 1 when released.
WITH h AS (
    UPDATE voice_hearings SET state = $2, why = $3 WHERE event_id = $1 AND state = 'held' RETURNING ledger_id
), released AS (
    UPDATE spend_ledger l SET usd = 0, spent = 0, drawn = 0, reserved = false FROM h WHERE l.id = h.ledger_id
    RETURNING l.id
)
SELECT count(*) AS released FROM h;

-- name: voice_hearing_asked
-- Voice note $1's words were taken to its bot: it is now $2 (asked: run $3; refused: why $4).
UPDATE voice_hearings SET state = $2, run_id = $3, why = $4 WHERE event_id = $1 AND state = 'heard';

-- name: record_speech_call
-- A paid speech call for run $1: kind $2, $3 units (seconds heard, characters said), $4 USD.
INSERT INTO speech_calls (run_id, kind, units, cost_usd) VALUES ($1, $2, $3, $4);

-- name: add_speech_spend
-- What a speech call for run $1 cost ($2 USD), counted in its spend. Speech is never drawn (an answer is said
-- after its run was settled): while the run is reserved, counted as spent beside any model call's draw; once
-- settled (even by a commit racing this one), added to what it settled at.
UPDATE spend_ledger
   SET spent = spent + $2, usd = CASE WHEN reserved THEN greatest(usd, spent + drawn + $2) ELSE usd + $2 END
 WHERE run_id = $1;

-- name: speech_calls_of
-- Run $1's paid speech calls, in the order they were made (`summon runs`): the transcription it was asked or
-- joined with, and its answers said.
SELECT kind, units::float8 AS units, cost_usd::float8 AS cost_usd, at FROM speech_calls
 WHERE run_id = $1 OR event_id IN (SELECT event_id FROM voice_hearings WHERE run_id = $1)
 ORDER BY id;
