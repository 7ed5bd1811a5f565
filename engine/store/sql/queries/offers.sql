-- A bot's choices (SPEC §4): offers cut from answers, and every press on them (engine/store/offers.py).

-- name: insert_offer
-- Run $1's answer offers choices: record the offer once (a finish retried after a crash records nothing new).
INSERT INTO bot_offers (run_id, bot, room_id, thread_root, asked_by, words, choices, links, style,
                        answer_txn, poll_txn)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (run_id) DO NOTHING
RETURNING id;

-- name: offer_of_run
-- The offer run $1's answer made, if it made one.
SELECT * FROM bot_offers WHERE run_id = $1;

-- name: offer_by_answer
-- The offer whose answer is event $1 in room $2 (a keycap reaction presses it).
SELECT * FROM bot_offers WHERE answer_event = $1 AND room_id = $2;

-- name: offer_by_poll
-- The offer whose poll is event $1 in room $2 (a vote presses it).
SELECT * FROM bot_offers WHERE poll_event = $1 AND room_id = $2;

-- name: offer_for_number
-- The offer a bare number from $2 in room $1 answers: the one whose answer it replies to ($4), else the
-- latest made to $2 in its thread ($3).
SELECT * FROM bot_offers
 WHERE room_id = $1 AND asked_by = $2 AND (answer_event = $4 OR thread_root = $3)
 ORDER BY coalesce(answer_event = $4, false) DESC, id DESC
 LIMIT 1;

-- name: record_press
-- Remember a press (event $5) on offer $1; no row back = this event was pressed before (a replay).
INSERT INTO bot_choices (offer_id, chooser, choice, how, event_id, room_id, thread_root)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (event_id) DO NOTHING
RETURNING id;

-- name: take_offer
-- Take offer $1 for $2's choice $3, once: a row back = this press got through; none = it was gone.
UPDATE bot_offers SET taken_by = $2, taken_choice = $3, taken_at = now()
 WHERE id = $1 AND taken_at IS NULL
RETURNING *;

-- name: release_offer
-- Give offer $1 back: the press that took it could not summon the bot (refused), so it is still to be had.
UPDATE bot_offers SET taken_by = NULL, taken_choice = NULL, taken_at = NULL WHERE id = $1;

-- name: press_taken
-- Press $1 is the one that took its offer, and summoned run $2.
UPDATE bot_choices SET taken = true, run_id = $2 WHERE id = $1;

-- name: taken_press_of_run
-- The press that summoned run $1, with the offer's answer event (a reply to a reaction would show nothing).
SELECT c.how, c.event_id, o.answer_event, o.thread_root
  FROM bot_choices c JOIN bot_offers o ON o.id = c.offer_id
 WHERE c.run_id = $1 AND c.taken;
