-- search_site: the index a publish rebuilds and the tool reads (engine/store/search.py).

-- name: clear_site_search
-- A publish empties the search index before writing it again from what it publishes.
DELETE FROM site_search;

-- name: insert_site_search
-- The index's rows, as parallel arrays: collection, slug, title, body; all in text-search configuration $5.
INSERT INTO site_search (collection, slug, title, body, language)
SELECT c, s, t, b, $5::regconfig FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS r(c, s, t, b);

-- name: text_search_config
-- $1 when it names a text-search configuration this database has, else 'simple' (which every database has).
SELECT coalesce((SELECT cfgname::text FROM pg_ts_config WHERE cfgname = $1), 'simple');

-- name: search_site
-- The best $2 rows for the words $1 (web-search syntax: "a phrase", -not, or), each with a snippet: read in the
-- language the index was built in.
WITH c AS (SELECT coalesce((SELECT language FROM site_search LIMIT 1), 'simple'::regconfig) AS language),
     q AS (SELECT c.language, websearch_to_tsquery(c.language, $1) AS query FROM c)
SELECT s.collection, s.slug, s.title,
       ts_headline(q.language, s.body, q.query,
                   'MaxWords=35, MinWords=12, MaxFragments=2, FragmentDelimiter=" … ", StartSel=**, StopSel=**')
           AS snippet,
       ts_rank_cd(s.document, q.query) AS rank
  FROM site_search s, q
 WHERE s.document @@ q.query
 ORDER BY rank DESC, s.collection, s.slug
 LIMIT $2;
