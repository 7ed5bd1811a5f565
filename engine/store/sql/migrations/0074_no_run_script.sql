-- A run no longer carries the stand-in model's turns (issue 26 item 4): the stand-in is an answerer chosen when
-- the service is built, handed its book by the tests and the demo, and nothing on a run's row chooses it.
ALTER TABLE agent_runs DROP COLUMN script;
