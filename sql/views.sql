-- The typed views of 1.1: pg_stat_cache_ext and pg_stat_cache_ext_scans.
CREATE TABLE pce_v AS SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 5000) g;
ANALYZE pce_v;

-- pg_stat_cache_ext is one row ...
SELECT count(*) AS rows FROM pg_stat_cache_ext;
-- ... whose columns are the counters of cache_ext_stats(), in its order, each
-- a bigint, and nothing else but stats_reset (a timestamptz, last): a counter
-- added to the module's tables and missing from the view, or a column the
-- module does not count, is a row here
SELECT c.name AS counter_without_column, a.attname AS column_without_counter
  FROM (SELECT name, n FROM cache_ext_stats() WITH ORDINALITY AS c(name, value, n)) AS c
  FULL JOIN (SELECT attname, attnum, atttypid FROM pg_attribute
              WHERE attrelid = 'pg_stat_cache_ext'::regclass AND attnum > 0 AND NOT attisdropped
                AND attname <> 'stats_reset') AS a
    ON a.attname = c.name AND a.attnum = c.n AND a.atttypid = 'bigint'::regtype
 WHERE c.name IS NULL OR a.attname IS NULL;
SELECT attnum = (SELECT count(*) + 1 FROM cache_ext_stats()) AS stats_reset_is_last,
       atttypid::regtype AS stats_reset_type
  FROM pg_attribute WHERE attrelid = 'pg_stat_cache_ext'::regclass AND attname = 'stats_reset';

-- stats_reset is the time cache_ext_stats_reset() returned, and the counters
-- the view shows are the functions' (marks_session moves only in this session)
SELECT cache_ext_stats_reset() AS reset_at \gset
SELECT stats_reset = :'reset_at'::timestamptz AS stats_reset_is_reset_time,
       stats_reset = cache_ext_stats_reset_time() AS same_as_function,
       marks_session AS marks_session_after_reset
  FROM pg_stat_cache_ext;
SET pg_cache_ext.scan = on;
SELECT 1 AS marked_statement;
SELECT 2 AS marked_statement;
SET pg_cache_ext.scan = off;
SELECT v.marks_session >= 2 AS view_counted_marks, v.marks_session = f.value AS view_equals_function
  FROM pg_stat_cache_ext AS v, cache_ext_stats() AS f
 WHERE f.name = 'marks_session';
RESET pg_cache_ext.scan;

-- pg_stat_cache_ext_scans: a scan sees its own row, with pg_stat_activity's
-- columns, from inside the statement ...
SET pg_cache_ext.scan_threshold = 0;
SELECT (SELECT row(datid = (SELECT oid FROM pg_database WHERE datname = current_database()),
                   datname = current_database(), usename = current_user,
                   usesysid = (SELECT oid FROM pg_roles WHERE rolname = current_user),
                   backend_type, reason, relid = 'pce_v'::regclass, schemaname, relname,
                   mark_start >= now(), in_kernel_map)
          FROM pg_stat_cache_ext_scans WHERE pid = pg_backend_pid()) AS own_row
  FROM pce_v WHERE g = 1;
-- ... and none after it
SELECT count(*) AS own_rows_after FROM pg_stat_cache_ext_scans WHERE pid = pg_backend_pid();
RESET pg_cache_ext.scan_threshold;

-- the views are for everyone, as the functions are
SELECT has_table_privilege('public', 'pg_stat_cache_ext', 'SELECT') AS public_reads_stats,
       has_table_privilege('public', 'pg_stat_cache_ext_scans', 'SELECT') AS public_reads_scans;
DROP TABLE pce_v;
