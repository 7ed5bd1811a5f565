-- How our users are named and look (engine/store/profiles.py).

-- The deployment's puppet prefix (appservice.puppet_prefix): every puppet is @<prefix><slug>. Rooms know those
-- ids, so a start with another prefix is refused; one row, recorded by the first start.
CREATE TABLE deployment (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    puppet_prefix text NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now()
);
-- A deployment from before the prefix was a setting had every puppet at @bot_<slug>.
INSERT INTO deployment (puppet_prefix) SELECT 'bot_' WHERE EXISTS (SELECT 1 FROM bots);

-- An image uploaded to the homeserver (a bot's or the service's avatar), once, by the SHA-256 of its bytes.
CREATE TABLE avatar_uploads (
    sha256      text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    mxc         text NOT NULL CHECK (mxc LIKE 'mxc://%'),
    uploaded_at timestamptz NOT NULL DEFAULT now()
);
