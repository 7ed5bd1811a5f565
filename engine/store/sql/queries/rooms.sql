-- The rooms we are in and who is in them: their state as we keep it, and the settings their admins set (engine/store/rooms.py).

-- name: ensure_room
-- A room we hear from gets a row the first time.
INSERT INTO rooms (room_id) VALUES ($1) ON CONFLICT (room_id) DO NOTHING;

-- name: lock_room
-- Everything stored about a room takes the room's row first, so two transactions touching the same
-- room (a transaction's events, the state read after a join) queue up instead of deadlocking.
SELECT room_id FROM rooms WHERE room_id = $1 FOR UPDATE;

-- name: get_room
-- The room's row.
SELECT * FROM rooms WHERE room_id = $1;

-- name: mark_room_encrypted
-- The room turned encrypted; returns the row only the first time.
UPDATE rooms SET encrypted = true, encrypted_at = now() WHERE room_id = $1 AND NOT encrypted
RETURNING room_id;

-- name: mark_room_left
-- We left (or were removed from) the room.
UPDATE rooms SET left_at = now() WHERE room_id = $1;

-- name: mark_room_joined
-- We are (back) in the room.
UPDATE rooms SET left_at = NULL WHERE room_id = $1;

-- name: set_room_create
-- The room's m.room.create content, its sender (the creator) and the room version.
UPDATE rooms SET create_content = $2, create_sender = $3, room_version = $4 WHERE room_id = $1;

-- name: set_room_power_levels
-- The room's current m.room.power_levels content.
UPDATE rooms SET power_levels = $2 WHERE room_id = $1;

-- name: mark_room_direct
-- One of our puppets was invited to room $1 as a direct chat.
UPDATE rooms SET direct = true WHERE room_id = $1;

-- name: set_room_join_rule
-- Room $1's join rule (m.room.join_rules) is now $2.
UPDATE rooms SET join_rule = $2 WHERE room_id = $1;

-- name: set_room_history_visibility
-- The room's current history visibility.
UPDATE rooms SET history_visibility = $2 WHERE room_id = $1;

-- name: upsert_member
-- A member event: who is in the room, under which display name.
INSERT INTO room_members (room_id, user_id, membership, display_name) VALUES ($1, $2, $3, $4)
ON CONFLICT (room_id, user_id) DO UPDATE
   SET membership = EXCLUDED.membership,
       display_name = coalesce(EXCLUDED.display_name, room_members.display_name),
       updated_at = now();

-- name: our_members
-- Which of our users (puppets and the service user, by prefix) are joined or invited in a room.
SELECT user_id, membership FROM room_members
 WHERE room_id = $1 AND user_id = ANY($2::text[]) AND membership IN ('join', 'invite');

-- name: get_member
-- One person's membership and display name in a room, and when a membership event of theirs was last stored.
SELECT membership, display_name, updated_at FROM room_members WHERE room_id = $1 AND user_id = $2;

-- name: room_readers
-- Everyone joined to room $1 or invited to it (an invited person reads what is said once they join).
SELECT user_id, membership FROM room_members
 WHERE room_id = $1 AND membership IN ('join', 'invite') ORDER BY user_id;

-- name: room_direct_readers
-- At most $2 of room $1's readers (joined or invited) when it is a direct chat, none otherwise: enough to tell a
-- DM with one bot, in one round trip, whatever the room's size.
SELECT m.user_id, m.membership FROM rooms r JOIN room_members m ON m.room_id = r.room_id
 WHERE r.room_id = $1 AND r.direct AND m.membership IN ('join', 'invite') LIMIT $2;

-- name: room_read_by_all_since
-- Since when everybody who reads room $1 now (joined or invited) has been in it: the latest of their memberships.
-- NULL: nobody.
SELECT max(updated_at) FROM room_members WHERE room_id = $1 AND membership IN ('join', 'invite');

-- name: room_people
-- Who is joined to room $1 now, with the display name the room shows (a person argument is one of them).
SELECT user_id, display_name FROM room_members WHERE room_id = $1 AND membership = 'join' ORDER BY user_id;

-- name: rooms_joined_by
-- The rooms user $1 (a puppet) is joined to that we are still in and can read (not encrypted).
SELECT m.room_id FROM room_members m JOIN rooms r ON r.room_id = m.room_id
 WHERE m.user_id = $1 AND m.membership = 'join' AND NOT r.encrypted AND r.left_at IS NULL
 ORDER BY m.room_id;

-- name: encrypted_rooms
-- Every room known to be encrypted: a schedule may not speak in one (refused at publish).
SELECT room_id FROM rooms WHERE encrypted ORDER BY room_id;

-- name: room_settings_now
-- A room's settings and whether it is encrypted, with the database's now (quiet hours are read against it).
SELECT settings, encrypted, now() AS now FROM rooms WHERE room_id = $1;

-- name: set_room_setting
-- Set one of a room's settings (key $2) to $3; returns the settings as they now are.
UPDATE rooms SET settings = settings || jsonb_build_object($2::text, $3::jsonb) WHERE room_id = $1
RETURNING settings;

-- name: clear_room_setting
-- Drop one of a room's settings (key $2) back to its default; returns the settings as they now are.
UPDATE rooms SET settings = settings - $2::text WHERE room_id = $1
RETURNING settings;
