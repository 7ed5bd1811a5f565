-- What a bot is given (SPEC §4): only lines the asker could see. Matrix applies history visibility per
-- event, with the room's state *at that event*; room_events keeps every state event we heard (the room's
-- state read after a join, then each change), so the visibility and the asker's membership at any line are
-- read back from it.

-- A person's membership, and the room's visibility, as they stood at some moment.
CREATE INDEX room_events_state_history ON room_events (room_id, event_type, state_key, ts, event_id)
    WHERE state_key IS NOT NULL;

-- Could p_user see the event (p_event at p_ts) in p_room, as the Matrix rules say (history visibility
-- module; Synapse's filter_events_for_client), from what we stored:
--   - their own membership events, always;
--   - world_readable: everyone;
--   - joined at the event: yes, whatever the visibility;
--   - joined: no otherwise; invited: only while invited;
--   - shared (the default, and what an unknown value counts as): while they are joined now (an asker we
--     hold no member row for has just spoken in the room, so is in it).
-- A membership we never heard of counts as not joined, so a line from before what we know of the person
-- (a thread fetched from the homeserver, say) is withheld under joined/invited rather than guessed at.
CREATE FUNCTION summon_can_see_v1(p_room text, p_user text, p_event text, p_ts bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM room_events o
                      WHERE o.event_id = p_event AND o.event_type = 'm.room.member' AND o.state_key = p_user)
            THEN true
        WHEN v.visibility = 'world_readable' THEN true
        WHEN w.membership = 'join' THEN true
        WHEN v.visibility = 'joined' THEN false
        WHEN v.visibility = 'invited' THEN w.membership = 'invite'
        ELSE NOT EXISTS (SELECT 1 FROM room_members n
                          WHERE n.room_id = p_room AND n.user_id = p_user AND n.membership <> 'join')
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
