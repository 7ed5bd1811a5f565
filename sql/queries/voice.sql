-- Voice notes heard and answers said (engine/store/voice.py; SPEC §12).

-- name: voice_note
-- Stored line $1 as it arrived (what hearing a voice note needs of it).
SELECT event_id, room_id, sender, event_type, ts, content, thread_root, reply_to
  FROM room_events WHERE event_id = $1;

-- name: voice_note_heard
-- Voice note $1 now says $2: its transcript, so every context shows the words.
UPDATE room_events SET said = $2 WHERE event_id = $1;

-- name: record_speech_call
-- A paid speech call for run $1: kind $2, $3 units (seconds heard, characters said), $4 USD.
INSERT INTO speech_calls (run_id, kind, units, cost_usd) VALUES ($1, $2, $3, $4);

-- name: add_speech_spend
-- What a speech call for run $1 cost ($2 USD), counted in its spend. Speech is never drawn (a hearing is bought
-- before its run exists, an answer said after it was settled): while the run is reserved, counted as spent beside
-- any model call's draw; once settled (even by a commit racing this one), added to what it settled at.
UPDATE spend_ledger
   SET spent = spent + $2, usd = CASE WHEN reserved THEN greatest(usd, spent + drawn + $2) ELSE usd + $2 END
 WHERE run_id = $1;

-- name: speech_calls_of
-- Run $1's paid speech calls, in the order they were made (`summon runs`).
SELECT kind, units::float8 AS units, cost_usd::float8 AS cost_usd, at FROM speech_calls WHERE run_id = $1 ORDER BY id;
