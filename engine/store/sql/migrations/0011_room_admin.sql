-- Room administration (SPEC §5): schedules a room's admins set with `!bots schedule …`, spoken in that room.
-- The fields are the recurrence grammar's own (engine.content.Schedule, as a bot's file writes them). Each
-- keeps its clock in `bot_clock` like a content schedule, under the trigger key 'room:<id>', started when
-- it is made (it never fires for the past) and dropped with it. A room's other settings (choices, which
-- bots answer, quiet hours) live in `rooms.settings`.
CREATE TABLE room_schedules (
    id         bigserial PRIMARY KEY,
    room_id    text NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
    bot        text NOT NULL REFERENCES bots (slug),
    schedule   jsonb NOT NULL,
    ask        text NOT NULL,
    made_by    text NOT NULL,
    made_in    text NOT NULL UNIQUE,  -- the `!bots schedule` line: a replayed line makes no second one
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX room_schedules_room ON room_schedules (room_id, id);
