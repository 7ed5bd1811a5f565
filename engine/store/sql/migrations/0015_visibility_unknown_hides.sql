-- History visibility fails closed on what it does not know: a value that is none of the four hides the
-- line (it used to count as `shared`). A room with no visibility event is `shared`, as the Matrix spec
-- says. (Redacting a visibility event keeps its `history_visibility`, as the Matrix redaction algorithm
-- does — see `redact_event` — so a redaction cannot open a room's history.)
CREATE OR REPLACE FUNCTION summon_can_see_v1(p_room text, p_user text, p_event text, p_ts bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM room_events o
                      WHERE o.event_id = p_event AND o.event_type = 'm.room.member' AND o.state_key = p_user)
            THEN true
        WHEN v.visibility = 'world_readable' THEN true
        WHEN w.membership = 'join' THEN true
        WHEN v.visibility = 'invited' THEN w.membership = 'invite'
        WHEN v.visibility = 'shared' THEN NOT EXISTS (SELECT 1 FROM room_members n
                                                       WHERE n.room_id = p_room AND n.user_id = p_user
                                                         AND n.membership <> 'join')
        ELSE false
    END
      FROM (SELECT coalesce((
                SELECT h.content->>'history_visibility' FROM room_events h
                 WHERE h.room_id = p_room AND h.event_type = 'm.room.history_visibility' AND h.state_key = ''
                   AND (h.ts, h.event_id) <= (p_ts, p_event)
                 ORDER BY h.ts DESC, h.event_id DESC LIMIT 1), 'shared') AS visibility) v,
           (SELECT coalesce((
                SELECT m.content->>'membership' FROM room_events m
                 WHERE m.room_id = p_room AND m.event_type = 'm.room.member' AND m.state_key = p_user
                   AND (m.ts, m.event_id) < (p_ts, p_event)
                 ORDER BY m.ts DESC, m.event_id DESC LIMIT 1), 'leave') AS membership) w
$$;
