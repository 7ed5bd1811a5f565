-- Lines are judged in the order summon heard them, not by `origin_server_ts`: that time is set by the sender's
-- server (or by an appservice's `?ts=`), so a remote server could backdate a join to before everything said in
-- a room and be shown it. `seq` is the arrival order: every event takes the next number as it is stored.
-- Who could see a line (summon_can_see_v2), what came before it, and the order a context reads in follow it.
CREATE SEQUENCE room_events_arrival;
ALTER TABLE room_events ADD COLUMN seq bigint;
-- What was stored before this keeps the order it was judged by until now: its time, then its id.
UPDATE room_events e SET seq = o.n
  FROM (SELECT event_id, row_number() OVER (ORDER BY ts, event_id) AS n FROM room_events) o
 WHERE e.event_id = o.event_id;
SELECT setval('room_events_arrival', coalesce((SELECT max(seq) FROM room_events), 0) + 1, false);
ALTER TABLE room_events ALTER COLUMN seq SET DEFAULT nextval('room_events_arrival'),
                        ALTER COLUMN seq SET NOT NULL;
ALTER SEQUENCE room_events_arrival OWNED BY room_events.seq;

-- A line fetched from the homeserver (a thread that began before we were in the room) was said before we
-- heard it, at a place in the room's history we cannot know without trusting its sender's clock.
ALTER TABLE room_events ADD COLUMN fetched boolean NOT NULL DEFAULT false;

-- An edit no longer overwrites its original's `said`: a line reads as its latest edit that still stands, else
-- its own words, worked out when it is read (sql/queries/lines.sql). So redacting an edit brings back what it
-- replaced. An original an edit overwrote before this lost its own words: with no standing edit left it reads
-- as nothing, rather than as the words of an edit that may since have been redacted. (`edited_ts` is no
-- longer written; it stays so a process of the last release, still running during a deploy, does not fail.)
UPDATE room_events SET said = '' WHERE replaces IS NULL AND edited_ts IS NOT NULL;

DROP INDEX room_events_timeline;
CREATE INDEX room_events_timeline ON room_events (room_id, seq) WHERE thread_root IS NULL AND replaces IS NULL;
DROP INDEX room_events_thread;
CREATE INDEX room_events_thread ON room_events (thread_root, seq) WHERE thread_root IS NOT NULL;
DROP INDEX room_events_state_history;
CREATE INDEX room_events_state_history ON room_events (room_id, event_type, state_key, seq)
    WHERE state_key IS NOT NULL;
-- A line's edits, latest first (the spec's aggregation: the newest by time, ties to the larger event id).
CREATE INDEX room_events_edits ON room_events (replaces, ts, event_id) WHERE replaces IS NOT NULL;
-- A redaction scrubs the line from every run's stored context in the room, finished runs too.
CREATE INDEX agent_runs_in_room ON agent_runs (room_id);

-- Could p_user see the event (p_event, heard p_seq-th; p_fetched: fetched from the homeserver, not heard) in
-- p_room, as the Matrix rules say (history visibility module; Synapse's filter_events_for_client):
--   - their own membership events, always;
--   - world_readable: everyone;
--   - joined at the event (the last membership of theirs we heard before it): yes, whatever the visibility;
--   - invited: only while invited; shared (and a room with no visibility event): while they are joined now
--     (an asker we hold no member row for has just spoken in the room, so is in it); anything else: no.
-- A fetched line predates what we heard of the room: nobody's membership then is known (so it is withheld
-- under joined and invited), and the visibility is the first we heard, never more open than shared.
-- summon_can_see_v1 stays for a caller of the last release during a rolling deploy.
CREATE FUNCTION summon_can_see_v2(p_room text, p_user text, p_event text, p_seq bigint, p_fetched boolean)
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
      FROM (SELECT CASE
                WHEN p_fetched THEN (
                    SELECT CASE WHEN f.first = 'world_readable' THEN 'shared' ELSE coalesce(f.first, 'shared') END
                      FROM (SELECT (SELECT h.content->>'history_visibility' FROM room_events h
                                     WHERE h.room_id = p_room AND h.event_type = 'm.room.history_visibility'
                                       AND h.state_key = ''
                                     ORDER BY h.seq LIMIT 1) AS first) f)
                ELSE coalesce((
                    SELECT h.content->>'history_visibility' FROM room_events h
                     WHERE h.room_id = p_room AND h.event_type = 'm.room.history_visibility' AND h.state_key = ''
                       AND h.seq <= p_seq
                     ORDER BY h.seq DESC LIMIT 1), 'shared')
            END AS visibility) v,
           (SELECT CASE
                WHEN p_fetched THEN 'leave'
                ELSE coalesce((
                    SELECT m.content->>'membership' FROM room_events m
                     WHERE m.room_id = p_room AND m.event_type = 'm.room.member' AND m.state_key = p_user
                       AND m.seq < p_seq
                     ORDER BY m.seq DESC LIMIT 1), 'leave')
            END AS membership) w
$$;
