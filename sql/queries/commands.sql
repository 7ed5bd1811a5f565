-- `!commands`, `!help` and MSC4332 command state (appservice/matrix/commands.py).

-- name: room_people
-- Who is joined to room $1 now, with the display name the room shows (a person argument is one of them).
SELECT user_id, display_name FROM room_members WHERE room_id = $1 AND membership = 'join' ORDER BY user_id;

-- name: rooms_joined_by
-- The rooms user $1 (a puppet) is joined to that we are still in and can read (not encrypted).
SELECT m.room_id FROM room_members m JOIN rooms r ON r.room_id = m.room_id
 WHERE m.user_id = $1 AND m.membership = 'join' AND NOT r.encrypted AND r.left_at IS NULL
 ORDER BY m.room_id;
