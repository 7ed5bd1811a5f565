-- A contact's tokens can be revoked: every token whose chain began at or before tokens_valid_after is refused,
-- on every call and by the streams already open (the update NOTIFYs them, as 'contact:<id>', on the desk's channel).
ALTER TABLE desk_contacts ADD COLUMN tokens_valid_after timestamptz;

CREATE FUNCTION summon_desk_tokens_revoked_notify_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('summon_desk', 'contact:' || NEW.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER desk_contacts_tokens_revoked
    AFTER UPDATE OF tokens_valid_after ON desk_contacts
    FOR EACH ROW EXECUTE FUNCTION summon_desk_tokens_revoked_notify_v1();
