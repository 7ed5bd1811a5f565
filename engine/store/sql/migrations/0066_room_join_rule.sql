-- A room whose join rule lets others in without an invite (public, knock, restricted) is never one person's
-- alone, whoever is in it now. Rooms already known take the rule from their stored state, where it was seen.
ALTER TABLE rooms ADD COLUMN join_rule text;
UPDATE rooms r SET join_rule = (
    SELECT e.content->>'join_rule' FROM room_events e
     WHERE e.room_id = r.room_id AND e.event_type = 'm.room.join_rules' AND e.state_key = ''
     ORDER BY e.ts DESC LIMIT 1);
