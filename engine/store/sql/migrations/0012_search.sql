-- What search_site searches: the site's docs (content/docs/), its skills' bodies and its commands'
-- hints, rebuilt whole by every publish (so an edited page is found by its new words, and no longer by
-- its old ones). Only what anyone may read is indexed: a skill or command with an audience is withheld.
-- English stemming: `refunds` finds `refund`. The title weighs more than the body.

CREATE TABLE site_search (
    collection text NOT NULL CHECK (collection IN ('docs', 'skills', 'commands')),
    slug       text NOT NULL,
    title      text NOT NULL,
    body       text NOT NULL,
    document   tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english'::regconfig, title), 'A')
        || setweight(to_tsvector('english'::regconfig, body), 'B')
    ) STORED,
    PRIMARY KEY (collection, slug)
);

CREATE INDEX site_search_document ON site_search USING GIN (document);
