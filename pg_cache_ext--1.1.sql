/* pg_cache_ext--1.1.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pg_cache_ext" to load this file. \quit

CREATE FUNCTION cache_ext_status(
    OUT name text,
    OUT value text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cache_ext_status'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION cache_ext_status() IS
'what pg_cache_ext has in force (state, mechanism, loader, kernel) and why';

CREATE FUNCTION cache_ext_stats(
    OUT name text,
    OUT value bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cache_ext_stats'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION cache_ext_stats() IS
'counters of pg_cache_ext: folios seen, marks, bytes dropped, errors';

CREATE FUNCTION cache_ext_stats_reset()
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'cache_ext_stats_reset'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION cache_ext_stats_reset() IS
'reset the module''s counters (the BPF counters run since the loader created the maps)';

-- changes shared state: superuser only unless granted
REVOKE ALL ON FUNCTION cache_ext_stats_reset() FROM PUBLIC;

CREATE FUNCTION cache_ext_scans(
    OUT pid integer,
    OUT reason text,
    OUT relation regclass,
    OUT database oid,
    OUT since timestamptz,
    OUT in_kernel_map boolean,
    OUT command text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cache_ext_scans'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION cache_ext_scans() IS
'processes marked as scanning now, why, since when, whether the kernel map has them, and the command of those outside the server (reason external: pg_cache_ext_run)';

CREATE FUNCTION cache_ext_relation_cache(
    rel regclass,
    OUT total_bytes bigint,
    OUT cached_bytes bigint,
    OUT dirty_bytes bigint,
    OUT cached_fraction float8,
    OUT method text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cache_ext_relation_cache'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION cache_ext_relation_cache(regclass) IS
'how much of a relation''s main fork is in the OS page cache (cachestat(2), or mincore)';

-- the typed views (new in 1.1: pg_cache_ext--1.0--1.1.sql adds the same)

CREATE FUNCTION cache_ext_stats_reset_time()
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'cache_ext_stats_reset_time'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION cache_ext_stats_reset_time() IS
'since when the module''s counters count: server start, crash restart or cache_ext_stats_reset()';

-- pg_stat_cache_ext: one row, a bigint column per counter of cache_ext_stats(),
-- in its order, and stats_reset.  The columns are taken from cache_ext_stats()
-- itself, whose names come from the module's counter tables, so the view
-- cannot list a counter the module does not have, nor miss one, for the
-- module that created it (a module with new counters comes with a new
-- extension version whose update script recreates the view).
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

-- pg_stat_cache_ext_scans: the marked processes of cache_ext_scans(), shaped
-- like pg_stat_activity and the progress views.  cache_ext_scans() hides what
-- the caller may not see (relation, mark_start, in_kernel_map), as
-- pg_stat_activity does; the view runs both with the caller's rights.
CREATE VIEW pg_stat_cache_ext_scans AS
SELECT s.pid,
       s.database AS datid,
       d.datname,
       a.usesysid,
       a.usename,
       a.application_name,
       a.backend_type,
       s.reason,
       s.relation::oid AS relid,
       n.nspname AS schemaname,
       c.relname,
       s.since AS mark_start,
       s.in_kernel_map,
       s.command
  FROM cache_ext_scans() AS s
  LEFT JOIN pg_catalog.pg_database AS d ON d.oid = s.database
  LEFT JOIN pg_catalog.pg_stat_activity AS a ON a.pid = s.pid
  LEFT JOIN pg_catalog.pg_class AS c ON c.oid = s.relation
  LEFT JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace;

COMMENT ON VIEW pg_stat_cache_ext_scans IS
'processes marked as scanning now, one row each, shaped like pg_stat_activity';

GRANT SELECT ON pg_stat_cache_ext, pg_stat_cache_ext_scans TO PUBLIC;
