-- A stranger cannot spend the operator's money, and one person's flood does not starve everyone (issue 12):
-- a fair claim across askers, at most N live runs per person, and a deployment-wide daily spend cap.

-- A run's turn: how many runs its asker already had waiting or running when it was summoned (0 for a run
-- nobody asked for). The claim takes the lowest turn first, then the oldest, so a person's 10th waiting
-- run never goes before another person's 1st.
ALTER TABLE agent_runs ADD COLUMN turn integer NOT NULL DEFAULT 0;
DROP INDEX agent_runs_queued;
CREATE INDEX agent_runs_queued ON agent_runs (turn, created_at, id) WHERE status = 'queued';

-- Every run reserves in the ledger now (the deployment's daily cap counts them all); a run with nobody to
-- pay for it (no asker, no subject) is the deployment's alone.
ALTER TABLE spend_ledger ALTER COLUMN who DROP NOT NULL;
CREATE INDEX spend_ledger_at ON spend_ledger (at) INCLUDE (usd);
-- A person's live runs are counted (at most N at a time) through their reservations not yet settled: an index
-- here, not on agent_runs, whose rows every fenced write rewrites (an index by asker there costs every step).
CREATE INDEX spend_ledger_reserved ON spend_ledger (who) WHERE reserved;

-- The deployment's own caps, written from summon.yaml by every process that starts, read (and, for the
-- daily cap, locked) by every summons, whichever process takes it in. One row.
CREATE TABLE deployment_caps (
    only_one             boolean PRIMARY KEY DEFAULT true CHECK (only_one),
    daily_spend          numeric(12, 6) CHECK (daily_spend >= 0),  -- USD in any 24 hours; NULL: no cap
    live_runs_per_person integer NOT NULL DEFAULT 3 CHECK (live_runs_per_person >= 1),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
INSERT INTO deployment_caps DEFAULT VALUES;

-- A refusal is told to the person at most once a minute per reason (a flood is not answered line by line).
CREATE INDEX summon_refusals_asker ON summon_refusals (asked_by, reason, created_at DESC) WHERE asked_by IS NOT NULL;
