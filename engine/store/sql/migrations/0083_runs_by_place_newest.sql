-- `summon runs` (room_runs) shows a room's latest runs. By place alone the index handed it every run the room
-- ever had, to be sorted for the newest few: a room's history read in full on every call, growing with it (make
-- bench-scale, tests/bench/year.py: the busy room). By (place, id) it reads just the newest, however many the
-- room has had; lookups by place alone use it as well.
DROP INDEX IF EXISTS agent_runs_in_place;
CREATE INDEX agent_runs_in_place ON agent_runs (place, id);
