-- Member bots (docs/member-bots.md): a charter each, sealed under an instance key. The table learns the
-- charter's random id, who wrote it (author), whom it is for (owner), how big it is and when — nothing of
-- its persona, schedule, sources or prompt. key_id names the key it is sealed under, so keys can rotate;
-- the nonce and ciphertext are in `sealed`. `failures` counts consecutive failed editions (the backoff
-- survives a restart: it forgives nothing). Its clock is a bot_clock row of the bot that hosts
-- member bots (the builder), under the trigger 'member:<id>'.
CREATE TABLE member_bots (
    id         text PRIMARY KEY,
    author     text NOT NULL,
    owner      text NOT NULL,
    key_id     text NOT NULL,
    sealed     bytea NOT NULL,
    size       integer NOT NULL CHECK (size >= 0),
    failures   integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX member_bots_owner ON member_bots (owner);
CREATE INDEX member_bots_author ON member_bots (author);
