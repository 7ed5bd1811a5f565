-- A voice session with no room is private (a personal tool may answer in it) only when the front end said the
-- session is one-to-one (its grant says so): a speakerphone in a kitchen is no DM.
ALTER TABLE door_sessions ADD COLUMN one_to_one boolean NOT NULL DEFAULT false;
