-- A queued message may edit or redact an earlier one (a run's progress line, edited in place and removed
-- when the answer lands): `of_txn` names the earlier message by its stable transaction id, resolved to
-- its event id when this one is sent.
ALTER TABLE outbox ADD COLUMN of_txn text;
