-- How our users are named and look: the deployment's puppet prefix, avatars uploaded once by content hash
-- (engine/store/profiles.py).

-- name: remember_puppet_prefix
-- The puppet prefix this deployment has: the one remembered, else $1 (remembered now).
WITH recorded AS (
    INSERT INTO deployment (puppet_prefix) VALUES ($1) ON CONFLICT (id) DO NOTHING RETURNING puppet_prefix
)
SELECT puppet_prefix FROM recorded UNION ALL SELECT puppet_prefix FROM deployment LIMIT 1;

-- name: avatar_upload
-- The mxc uri an image with this SHA-256 was uploaded as, if it was.
SELECT mxc FROM avatar_uploads WHERE sha256 = $1;

-- name: record_avatar_upload
-- An image uploaded: its SHA-256 and where it is (a race uploads twice and keeps the first).
INSERT INTO avatar_uploads (sha256, mxc) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING;
