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

-- name: add_settled_spend
-- What a speech made after run $1 was settled cost ($2 USD), added to its settled spend.
UPDATE spend_ledger SET usd = usd + $2, spent = spent + $2 WHERE run_id = $1 AND NOT reserved;
