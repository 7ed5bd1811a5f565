-- search_site in the site's own language (its strings' `### words` `language`): the index is built with the
-- matching text-search configuration ('simple' where none fits), written on every row by the publish that built
-- it, and the search reads it from there — never English-only.
ALTER TABLE site_search DROP COLUMN document;
ALTER TABLE site_search ADD COLUMN language regconfig NOT NULL DEFAULT 'english'::regconfig;
ALTER TABLE site_search ADD COLUMN document tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector(language, title), 'A') || setweight(to_tsvector(language, body), 'B')
) STORED;
CREATE INDEX site_search_document ON site_search USING GIN (document);
