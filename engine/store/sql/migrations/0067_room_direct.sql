-- A room one of our puppets was invited to as a direct chat (the invite's is_direct, as Element's "Start a chat"
-- sends it): there, with nobody else in it, every line a person says is for that bot.
ALTER TABLE rooms ADD COLUMN direct boolean NOT NULL DEFAULT false;
