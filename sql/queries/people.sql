-- The site's people (SPEC §8): what a personal tool asks, and the audience reader. The personal queries
-- name nobody: whom they answer for is set by agent_become_v1 from the run and read by row security.

-- name: personal_as_tools
-- For the rest of this transaction, act as the tools role: it owns nothing and row security applies to it.
SET LOCAL ROLE summon_tools;

-- name: personal_as_engine
-- Back to the engine's own role within the transaction (to queue what the tool's result asks for).
RESET ROLE;

-- name: personal_become
-- Answer for run $1's subject for the rest of this transaction; true when there is somebody to answer for.
SELECT agent_become_v1($1);

-- name: personal_about_me
-- Everything the person the transaction answers for could see about themselves (NULL: nobody to ask about).
SELECT about_me_v1();

-- name: personal_raise_ticket
-- A ticket for run $1's subject (subject $2, body $3), declared as the bot's own; NULL: nobody to raise it for.
SELECT agent_raise_ticket_v1($1, $2, $3);

-- name: site_classes
-- The audience classes the site's people tables give account $1 (customer, subscribed, tier:, role:, bought:).
SELECT coalesce(array_agg(DISTINCT c.class ORDER BY c.class), '{}'::text[]) AS classes
  FROM (SELECT 'customer' AS class FROM site_orders WHERE user_id = $1 AND status = 'paid'
        UNION ALL
        SELECT 'bought:' || product FROM site_orders WHERE user_id = $1 AND status = 'paid'
        UNION ALL
        SELECT CASE WHEN kind = 'tier' THEN 'tier:' ELSE 'role:' END || name
          FROM site_memberships
         WHERE user_id = $1 AND since <= now() AND (until IS NULL OR until > now())
        UNION ALL
        SELECT 'subscribed'
          FROM site_memberships
         WHERE user_id = $1 AND kind = 'tier' AND since <= now() AND (until IS NULL OR until > now())) c;
