-- Nobody mints unlimited desk contacts, each a fresh spender (issue 24 item 4).
-- Where a contact and a conversation were made from: a keyed hash of the client's address (an IPv6 one cut to
-- its /64), never the address itself, kept only as long as the hourly limits read it (the desk's sweep clears
-- it after a day). Several `summon serve` processes count the same rows, so they agree.
ALTER TABLE desk_contacts ADD COLUMN made_from text;
ALTER TABLE desk_conversations ADD COLUMN made_from text;
CREATE INDEX desk_contacts_made_from ON desk_contacts (made_from, created_at) WHERE made_from IS NOT NULL;
CREATE INDEX desk_contacts_inbox_made ON desk_contacts (inbox_id, created_at);
CREATE INDEX desk_contacts_guests ON desk_contacts (created_at) WHERE user_id IS NULL;
CREATE INDEX desk_conversations_made_from ON desk_conversations (made_from, created_at) WHERE made_from IS NOT NULL;

-- A pool of spend (a surface's own, e.g. a desk inbox) with a daily cap of its own: every run started from
-- it reserves under its name, and its row is what racing summonses lock to be counted one after another.
CREATE TABLE spend_pools (
    pool text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE spend_ledger ADD COLUMN pool text REFERENCES spend_pools (pool);
CREATE INDEX spend_ledger_pool ON spend_ledger (pool, at) INCLUDE (usd) WHERE pool IS NOT NULL;

-- A run nobody asked for that still counts in a person's live runs (and takes its turn in the claim): the
-- person it counts for. NULL: its asker's, if any.
ALTER TABLE agent_runs ADD COLUMN live_for text;
