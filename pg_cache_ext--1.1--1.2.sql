/* pg_cache_ext--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_cache_ext UPDATE TO '1.2'" to load this file. \quit

-- 1.2: the module counts scans_joined_vacuum (marked scans started where a
-- VACUUM of their table was: pg_cache_ext.scans_join_vacuum).  The columns of
-- pg_stat_cache_ext were fixed when 1.1 was created, by the module of that
-- time, so the view is made again from this module's cache_ext_stats().  A
-- view of the user's own built on it has to be dropped first (the DROP says
-- which), as for any view an update script remakes.

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
