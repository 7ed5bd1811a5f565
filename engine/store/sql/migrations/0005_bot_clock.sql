-- The clock a scheduled bot keeps (SPEC §6): when each of its schedules last fired. Kept on the bot, not
-- worked out from runs, so a cancelled, failed or refused run still counts as fired. `trigger` is a
-- stable key for one `hears: - schedule:` (a hash of what it says, engine.ticks.trigger_key): an edited
-- schedule is a new clock that starts at now, so it never fires for the past.
CREATE TABLE bot_clock (
    bot           text NOT NULL REFERENCES bots (slug),
    trigger       text NOT NULL,
    last_fired_at timestamptz NOT NULL,   -- the last occurrence fired (or, before the first, started_at)
    started_at    timestamptz NOT NULL,   -- when the tick first saw this schedule
    PRIMARY KEY (bot, trigger)
);
