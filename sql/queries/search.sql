-- search_site: the index a publish rebuilds and the tool reads (engine/store/search.py).

-- name: clear_site_search
-- A publish empties the search index before writing it again from what it publishes.
DELETE FROM site_search;

-- name: insert_site_search
-- The index's rows, as parallel arrays: collection, slug, title, body.
INSERT INTO site_search (collection, slug, title, body)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]);

-- name: search_site
-- The best $2 rows for the words $1 (web-search syntax: "a phrase", -not, or), each with a snippet.
WITH q AS (SELECT websearch_to_tsquery('english'::regconfig, $1) AS query)
SELECT s.collection, s.slug, s.title,
       ts_headline('english'::regconfig, s.body, q.query,
                   'MaxWords=35, MinWords=12, MaxFragments=2, FragmentDelimiter=" … ", StartSel=**, StopSel=**')
           AS snippet,
       ts_rank_cd(s.document, q.query) AS rank
  FROM site_search s, q
 WHERE s.document @@ q.query
 ORDER BY rank DESC, s.collection, s.slug
 LIMIT $2;
