-- Rules for bridged social conversations (appservice/social/tables.py): the bridged rooms, the rules written in
-- them, the drafts their lines made, the review place's posts, and each rule's history.

-- name: social_room_keep
-- Room $1 is bridged by $2 ($3: protocol, $4: network, $5: channel), a $6 conversation, known by its $7.
INSERT INTO social_rooms (room_id, bridge, protocol, network, channel, conversation, known_by)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (room_id) DO UPDATE SET bridge = EXCLUDED.bridge, protocol = EXCLUDED.protocol,
    network = EXCLUDED.network, channel = EXCLUDED.channel, conversation = EXCLUDED.conversation,
    known_by = EXCLUDED.known_by, bridged = true, updated_at = now()
 WHERE social_rooms.known_by = 'members' OR EXCLUDED.known_by = 'state'
RETURNING room_id;

-- name: social_room_get
-- What is known of bridged room $1 (bridged or no longer).
SELECT room_id, bridge, protocol, network, channel, conversation, known_by, bridged FROM social_rooms
 WHERE room_id = $1;

-- name: social_room_unbridge
-- Room $1's bridge state was taken away: no longer bridged.
UPDATE social_rooms SET bridged = false, updated_at = now() WHERE room_id = $1 AND bridged RETURNING room_id;

-- name: social_rooms_count
-- How many rooms are bridged, and how many rules are live and paused in them.
SELECT (SELECT count(*) FROM social_rooms WHERE bridged) AS rooms,
       (SELECT count(*) FROM social_rules WHERE state = 'active') AS active,
       (SELECT count(*) FROM social_rules WHERE state = 'paused') AS paused;

-- name: social_rule_add
-- A rule for room $1: phrase $2 on lines of kind $3, bot $4 answering to $5, by $6 (in event $7 of room $8).
INSERT INTO social_rules (room_id, phrase, line_kind, bot, destination, author, made_in, governed_in)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING id, room_id, phrase, line_kind, bot, destination, state, auto, author, governed_in, paused_why;

-- name: social_rule_get
-- Rule $1 (a removed one too).
SELECT id, room_id, phrase, line_kind, bot, destination, state, auto, author, governed_in, paused_why FROM social_rules
 WHERE id = $1;

-- name: social_rules_in_room
-- The rules for room $1 that were not removed, oldest first.
SELECT id, room_id, phrase, line_kind, bot, destination, state, auto, author, governed_in, paused_why FROM social_rules
 WHERE room_id = $1 AND state <> 'removed' ORDER BY id;

-- name: social_rules_all
-- Every rule not removed, oldest first, at most $1 (the staff room's list).
SELECT id, room_id, phrase, line_kind, bot, destination, state, auto, author, governed_in, paused_why FROM social_rules
 WHERE state <> 'removed' ORDER BY id LIMIT $1;

-- name: social_rules_live
-- The live rules in room $1 for lines of kind $2, oldest first (each line is matched against these).
SELECT id, room_id, phrase, line_kind, bot, destination, state, auto, author, governed_in, paused_why FROM social_rules
 WHERE room_id = $1 AND line_kind = $2 AND state = 'active' ORDER BY id;

-- name: social_rule_set_state
-- Rule $1 becomes $2 (why: $3), unless removed; the rule as it is now.
UPDATE social_rules SET state = $2, paused_why = $3, changed_at = now() WHERE id = $1 AND state <> 'removed'
RETURNING id, room_id, phrase, line_kind, bot, destination, state, auto, author, governed_in, paused_why;

-- name: social_rule_set_auto
-- Rule $1 sends without review ($2), unless removed; the rule as it is now.
UPDATE social_rules SET auto = $2, changed_at = now() WHERE id = $1 AND state <> 'removed'
RETURNING id, room_id, phrase, line_kind, bot, destination, state, auto, author, governed_in, paused_why;

-- name: social_draft_add
-- Line $4 (key $5) in room $2 (thread $3) matched rule $1: its one draft; nothing when it made one before.
INSERT INTO social_drafts (rule_id, room_id, thread, line_event, line_key) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (rule_id, line_key) DO NOTHING
RETURNING id;

-- name: social_drafts_lately
-- How many drafts rule $1 made in the last hour, counted under a lock of the rule's own (so two lines count in
-- turn). An advisory lock, not the rule's row: a worker finishing a draft (which holds its asker's row, and then
-- writes the rule's history) never waits for it, so the two cannot wait for each other.
WITH locked AS (SELECT pg_advisory_xact_lock(hashtext('summon.social.rule'), $1::int))
SELECT count(*) FROM social_drafts d, locked WHERE d.rule_id = $1 AND d.created_at > now() - interval '1 hour';

-- name: social_draft_set_run
-- Draft $1 is being written by run $2.
UPDATE social_drafts SET run_id = $2 WHERE id = $1;

-- name: social_draft_of_run
-- The draft run $1 writes.
SELECT id, rule_id, room_id, thread, line_event, run_id, text, status, settled_by FROM social_drafts
 WHERE run_id = $1;

-- name: social_draft_get
-- Draft $1.
SELECT id, rule_id, room_id, thread, line_event, run_id, text, status, settled_by FROM social_drafts WHERE id = $1;

-- name: social_draft_written
-- Draft $1's words are $2, now waiting as $3 (pending review, or ended with none); only a draft still asked.
UPDATE social_drafts SET text = $2, status = $3 WHERE id = $1 AND status = 'asked'
RETURNING id, rule_id, room_id, thread, line_event, run_id, text, status, settled_by;

-- name: social_draft_settle
-- Draft $1 becomes $2 (words $3, by $4); only from $5 (what it must still be), so it is settled once.
UPDATE social_drafts SET status = $2, text = coalesce($3, text), settled_by = $4, settled_at = now()
 WHERE id = $1 AND status = $5
RETURNING id, rule_id, room_id, thread, line_event, run_id, text, status, settled_by;

-- name: social_post_remember
-- Post $1 (an outbox txn id) in the review place, for conversation $2 (draft $3), as a $4; a second time is nothing.
INSERT INTO social_posts (txn_id, conversation, draft_id, kind) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
RETURNING txn_id;

-- name: social_post_by_event
-- What the review place's post $1 (an event id) is.
SELECT txn_id, event_id, conversation, draft_id, kind FROM social_posts WHERE event_id = $1;

-- name: social_history_add
-- Rule $1's history: $4 (draft $2, run $3) by $5, because $6.
INSERT INTO social_history (rule_id, draft_id, run_id, what, by_whom, why) VALUES ($1, $2, $3, $4, $5, $6);

-- name: social_history_of
-- Rule $1's newest $2 entries, newest first.
SELECT id, rule_id, draft_id, run_id, what, by_whom, why, at FROM social_history
 WHERE rule_id = $1 ORDER BY id DESC LIMIT $2;
