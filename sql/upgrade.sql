-- ALTER EXTENSION pg_cache_ext UPDATE, from 1.0 and from 1.1, gives the
-- objects of a fresh 1.2 install (setup.sql made one): the same members, each
-- with the same definition, columns, privileges and comment.
CREATE VIEW pce_ext_objects AS
SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS object,
       CASE d.classid
         WHEN 'pg_proc'::regclass THEN pg_get_functiondef(d.objid)
         WHEN 'pg_class'::regclass THEN pg_get_viewdef(d.objid)
       END AS definition,
       (SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
          FROM pg_attribute WHERE d.classid = 'pg_class'::regclass AND attrelid = d.objid
           AND attnum > 0 AND NOT attisdropped) AS columns,
       coalesce((SELECT proacl::text FROM pg_proc WHERE d.classid = 'pg_proc'::regclass AND oid = d.objid),
                (SELECT relacl::text FROM pg_class WHERE d.classid = 'pg_class'::regclass AND oid = d.objid))
         AS acl,
       obj_description(d.objid, (SELECT relname FROM pg_class WHERE oid = d.classid)) AS comment
  FROM pg_depend AS d
  JOIN pg_extension AS e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
 WHERE e.extname = 'pg_cache_ext' AND d.deptype = 'e';

SELECT extversion AS fresh_version FROM pg_extension WHERE extname = 'pg_cache_ext';
CREATE TABLE pce_fresh AS SELECT * FROM pce_ext_objects;
SELECT object, definition IS NOT NULL AS has_definition,
       coalesce((SELECT string_agg(privilege_type, ',') FROM aclexplode(acl::aclitem[]) WHERE grantee = 0),
                CASE WHEN acl IS NULL THEN 'default' ELSE 'none' END) AS public_privileges,
       comment IS NOT NULL AS has_comment
  FROM pce_fresh
 WHERE object NOT LIKE 'type %'	-- the views' row types: members from 18 on; compared below
 ORDER BY object;

DROP EXTENSION pg_cache_ext;
CREATE EXTENSION pg_cache_ext VERSION '1.0';
SELECT object FROM pce_ext_objects WHERE object NOT LIKE 'type %' ORDER BY object;
ALTER EXTENSION pg_cache_ext UPDATE;
SELECT extversion AS updated_version FROM pg_extension WHERE extname = 'pg_cache_ext';

-- no difference either way
CREATE VIEW pce_differences AS
(SELECT 'only fresh' AS side, * FROM pce_fresh EXCEPT SELECT 'only fresh', * FROM pce_ext_objects)
UNION ALL
(SELECT 'only updated', * FROM pce_ext_objects EXCEPT SELECT 'only updated', * FROM pce_fresh);
SELECT * FROM pce_differences ORDER BY 1, 2;

-- From 1.1 as the module of 1.1 made it: its pg_stat_cache_ext has no column
-- scans_joined_vacuum (the view takes its columns from the module's counters
-- when it is created); the update makes the view again with it.
DROP EXTENSION pg_cache_ext;
CREATE EXTENSION pg_cache_ext VERSION '1.1';
DO $$
DECLARE
	definition text := pg_get_viewdef('pg_stat_cache_ext');
BEGIN
	ALTER EXTENSION pg_cache_ext DROP VIEW pg_stat_cache_ext;
	DROP VIEW pg_stat_cache_ext;
	EXECUTE 'CREATE VIEW pg_stat_cache_ext AS '
		|| regexp_replace(definition, '\s*[^,]*\mAS scans_joined_vacuum,', '');
	ALTER EXTENSION pg_cache_ext ADD VIEW pg_stat_cache_ext;
	COMMENT ON VIEW pg_stat_cache_ext IS 'as 1.1 made it';
	GRANT SELECT ON pg_stat_cache_ext TO PUBLIC;
END
$$;
SELECT count(*) AS columns_scans_joined_vacuum_in_1_1
  FROM pg_attribute WHERE attrelid = 'pg_stat_cache_ext'::regclass AND attname = 'scans_joined_vacuum';

-- With the 1.1 module still loaded (a package upgraded, the server not yet
-- restarted), the update stops and says why, and 1.1 stays: here
-- cache_ext_stats() answers as that module did, without the new counter.
CREATE FUNCTION pce_module_stats(OUT name text, OUT value bigint) RETURNS SETOF record
  AS '$libdir/pg_cache_ext', 'cache_ext_stats' LANGUAGE C STRICT;
CREATE OR REPLACE FUNCTION cache_ext_stats(OUT name text, OUT value bigint) RETURNS SETOF record
  LANGUAGE sql AS $$ SELECT * FROM pce_module_stats() WHERE name <> 'scans_joined_vacuum' $$;
DO $$
DECLARE
	hint text;
BEGIN
	ALTER EXTENSION pg_cache_ext UPDATE;
	RAISE NOTICE 'updated';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
	RAISE NOTICE 'refused: % (hint: %)', SQLERRM, hint;
END
$$;
SELECT extversion AS version_after_refused_update FROM pg_extension WHERE extname = 'pg_cache_ext';
CREATE OR REPLACE FUNCTION cache_ext_stats(OUT name text, OUT value bigint) RETURNS SETOF record
  AS '$libdir/pg_cache_ext', 'cache_ext_stats' LANGUAGE C STRICT VOLATILE PARALLEL SAFE;
DROP FUNCTION pce_module_stats();

-- the server restarted with the new module
ALTER EXTENSION pg_cache_ext UPDATE;
SELECT extversion AS updated_version FROM pg_extension WHERE extname = 'pg_cache_ext';
SELECT count(*) AS columns_scans_joined_vacuum_in_1_2
  FROM pg_attribute WHERE attrelid = 'pg_stat_cache_ext'::regclass AND attname = 'scans_joined_vacuum';
SELECT * FROM pce_differences ORDER BY 1, 2;

-- and the updated views work
SELECT count(*) AS stats_rows FROM pg_stat_cache_ext;
SELECT count(*) >= 0 AS scans_readable FROM pg_stat_cache_ext_scans;
DROP VIEW pce_differences;
DROP TABLE pce_fresh;
DROP VIEW pce_ext_objects;
