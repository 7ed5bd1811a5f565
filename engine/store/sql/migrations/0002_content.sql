-- The rest of the published content: skills, tools and commands (each a projection of its file,
-- withdrawn rather than deleted when the file goes, like bots), and which skills and tools each bot
-- has as of the last publish (`skills: all` resolved then, so a skill written later is in the next).

CREATE TABLE skills (
    name         text PRIMARY KEY,
    description  text NOT NULL,
    compiled     jsonb NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    withdrawn_at timestamptz
);

CREATE TABLE tools (
    name         text PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('openapi', 'module')),
    compiled     jsonb NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    withdrawn_at timestamptz
);

-- A command asks a bot or runs a tool. `shape` is what a client may see (name, hint, arguments);
-- `prompt` is the worker's alone, so a client cannot send its own words under a command's name.
CREATE TABLE commands (
    name         text PRIMARY KEY,
    bot          text REFERENCES bots (slug),
    tool         text,
    surfaces     text[] NOT NULL,
    shape        jsonb NOT NULL,
    prompt       text NOT NULL DEFAULT '',
    compiled     jsonb NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    withdrawn_at timestamptz,
    CHECK ((bot IS NULL) <> (tool IS NULL))
);

CREATE TABLE bot_skills (
    bot   text NOT NULL REFERENCES bots (slug),
    skill text NOT NULL REFERENCES skills (name),
    PRIMARY KEY (bot, skill)
);

-- A bot's own tools (a skill's come with the skill). Built-ins have no row in `tools`, so no key.
CREATE TABLE bot_tools (
    bot  text NOT NULL REFERENCES bots (slug),
    tool text NOT NULL,
    PRIMARY KEY (bot, tool)
);
