-- Every history version records the chatbot choice's key it was served under
-- (`_ocs_served_under`, null for a server without choices): it is part of the version's canonical
-- content, so the key that decides whether a missing row was deleted is chained with audit on.
-- The column is added to every existing history table in code (postgres-migrations.ts); versions
-- written before keep null, as their `_content_hash` was computed without it.
SELECT 1;
