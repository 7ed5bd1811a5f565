-- A ticket's account need not have a `people` row: a Matrix user the site knows nothing else about is
-- still somebody, and raise_ticket must work for them (with the foreign key, every such raise failed).
ALTER TABLE tickets DROP CONSTRAINT tickets_user_id_fkey;
