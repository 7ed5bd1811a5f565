-- Spend that holds (issue 19): a run's reservation is drawn on per model call and settled per call, in the same
-- commit as the step. `usd` stays what every window counts (its indexes include it): while the run is live, the
-- most of its reservation and what it has spent and drawn — so nothing a run spends is ever left uncounted.
ALTER TABLE spend_ledger
    ADD COLUMN spent numeric(12, 6) NOT NULL DEFAULT 0 CHECK (spent >= 0),  -- what its recorded calls cost so far
    ADD COLUMN drawn numeric(12, 6) NOT NULL DEFAULT 0 CHECK (drawn >= 0);  -- the worst case of its call in flight
