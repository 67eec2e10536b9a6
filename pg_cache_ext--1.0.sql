/* pg_cache_ext--1.0.sql */

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
    OUT in_kernel_map boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cache_ext_scans'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION cache_ext_scans() IS
'processes marked as scanning now, why, since when, and whether the kernel map has them';

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
