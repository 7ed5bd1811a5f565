-- Backpressure, not collapse (issue 18): past this many summonses waiting for one bot (queued for a worker, or
-- waiting for a provider's permit), new ones are refused in words rather than queued for ten minutes.
ALTER TABLE deployment_caps ADD COLUMN waiting_per_bot integer NOT NULL DEFAULT 100 CHECK (waiting_per_bot >= 1);
