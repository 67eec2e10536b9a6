/* pg_cache_ext--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_cache_ext UPDATE TO '1.2'" to load this file. \quit

-- 1.2: the module counts scans_joined_vacuum (marked scans started where a
-- VACUUM of their table was: pg_cache_ext.scans_join_vacuum).  The columns of
-- pg_stat_cache_ext were fixed when 1.1 was created, by the module of that
-- time, so the view is made again, whole, from this module's
-- cache_ext_stats(): it gains every counter the module has (a 1.1 made by an
-- early 1.1 module lacks others too).  The view made again has the grant and
-- comment of a fresh install: grants or a comment of the site's own are to be
-- made again after the update.  Objects that use the view or its row type (a
-- view, a function returning it) stop the DROP, which names them: drop them,
-- update, make them again.

-- The view is made from the module the server has loaded: one installed but
-- not yet loaded (a package upgraded, the server not restarted) would give a
-- 1.2 without the new column, and no update left to mend it.
DO $check$
BEGIN
	IF NOT EXISTS (SELECT FROM cache_ext_stats() WHERE name = 'scans_joined_vacuum') THEN
		RAISE EXCEPTION 'the server runs an older pg_cache_ext module, without the counters of extension version 1.2'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Restart the server after installing pg_cache_ext, then run ALTER EXTENSION pg_cache_ext UPDATE.';
	END IF;
END
$check$;

DROP VIEW pg_stat_cache_ext;

DO $do$
DECLARE
	counter_columns text;
BEGIN
	SELECT string_agg(format('max(s.value) FILTER (WHERE s.name = %L) AS %I', c.name, c.name),
					  E',\n       ' ORDER BY c.n)
	  INTO STRICT counter_columns
	  FROM cache_ext_stats() WITH ORDINALITY AS c(name, value, n);
	EXECUTE format($view$
CREATE VIEW pg_stat_cache_ext AS
SELECT %s,
       cache_ext_stats_reset_time() AS stats_reset
  FROM cache_ext_stats() AS s$view$, counter_columns);
END
$do$;

COMMENT ON VIEW pg_stat_cache_ext IS
'counters of pg_cache_ext, one typed column each (cache_ext_stats() as one row)';

GRANT SELECT ON pg_stat_cache_ext TO PUBLIC;
