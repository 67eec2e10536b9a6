-- Marking seen from inside the scanning statement itself, and unmarking.
CREATE TABLE pce_t AS SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 20000) g;
CREATE INDEX ON pce_t (g);
ANALYZE pce_t;
CREATE FUNCTION my_mark() RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT coalesce(string_agg(reason || ':' || coalesce(relation::text, '-') || ':' || in_kernel_map, ','), 'unmarked')
     FROM cache_ext_scans() WHERE pid = pg_backend_pid() $$;

-- a seq scan above the threshold marks the backend while it runs ...
SET pg_cache_ext.scan_threshold = 0;
SET enable_indexscan = off; SET enable_bitmapscan = off;
SELECT my_mark() FROM pce_t WHERE g = 1;
-- ... and not after it
SELECT my_mark();
-- below the threshold nothing is marked
SET pg_cache_ext.scan_threshold = '100MB';
SELECT my_mark() FROM pce_t WHERE g = 1;
-- an index lookup never marks
RESET enable_indexscan;
SET pg_cache_ext.scan_threshold = 0;
SELECT my_mark() FROM pce_t WHERE g = 1;
SET enable_indexscan = off;
-- -1 disables the plan rule
SET pg_cache_ext.scan_threshold = -1;
SELECT my_mark() FROM pce_t WHERE g = 1;
-- SET pg_cache_ext.scan = on marks every statement, off never
SET pg_cache_ext.scan = on;
SELECT my_mark();
SET pg_cache_ext.scan = off;
SET pg_cache_ext.scan_threshold = 0;
SELECT my_mark() FROM pce_t WHERE g = 1;
RESET pg_cache_ext.scan;

-- an error in the middle of a scan leaves no mark behind
SELECT 1 / (g - 10000) FROM pce_t;
SELECT my_mark();
-- nor does an error inside a subtransaction that the function catches
CREATE FUNCTION scan_and_fail() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    PERFORM 1 / (g - 10000) FROM pce_t;
  EXCEPTION WHEN division_by_zero THEN
    RETURN 'caught, ' || my_mark();
  END;
  RETURN 'not reached';
END $$;
SET pg_cache_ext.scan_threshold = -1;
SELECT scan_and_fail();
SET pg_cache_ext.scan_threshold = 0;
SELECT scan_and_fail();
SELECT my_mark();

-- a cursor keeps the mark until it is closed
BEGIN;
DECLARE c CURSOR FOR SELECT g FROM pce_t;
FETCH 1 FROM c;
SELECT my_mark();
CLOSE c;
SELECT my_mark();
COMMIT;

-- utility commands
CREATE FUNCTION marks_of(r text) RETURNS bigint LANGUAGE sql AS
$$ SELECT value FROM cache_ext_stats() WHERE name = 'marks_' || r $$;
CREATE TEMP TABLE before AS
  SELECT r, marks_of(r) AS n FROM unnest(ARRAY['vacuum','analyze','create_index','reindex','cluster','copy_to','refresh_matview']) r;
VACUUM pce_t;
ANALYZE pce_t;
CREATE INDEX pce_t_pad ON pce_t (pad);
REINDEX INDEX pce_t_pad;
CLUSTER pce_t USING pce_t_pad;
COPY pce_t TO '/dev/null';
COPY (SELECT * FROM pce_t) TO '/dev/null';
CREATE MATERIALIZED VIEW pce_mv AS SELECT count(*) FROM pce_t;
REFRESH MATERIALIZED VIEW pce_mv;
SELECT r, marks_of(r) - n AS new_marks FROM before ORDER BY r;
-- a command left out of scan_commands is not marked
SET pg_cache_ext.scan_commands = 'analyze';
TRUNCATE before;
INSERT INTO before SELECT r, marks_of(r) FROM unnest(ARRAY['vacuum','analyze']) r;
VACUUM pce_t;
ANALYZE pce_t;
SELECT r, marks_of(r) - n AS new_marks FROM before ORDER BY r;
RESET pg_cache_ext.scan_commands;
SELECT my_mark();

-- cache_ext_scans() follows pg_stat_activity: the relation, since when and
-- the kernel map are shown for rows of roles whose privileges the caller
-- has, and to pg_read_all_stats; under SET ROLE this session's own row
-- belongs to its session user
CREATE FUNCTION scan_seen() RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT concat_ws(':', reason, coalesce(relation::text, '-'), (since IS NOT NULL)::text,
                    coalesce(in_kernel_map::text, '-'))
     FROM cache_ext_scans() WHERE pid = pg_backend_pid() $$;
CREATE ROLE pce_plain;
CREATE ROLE pce_stats_reader IN ROLE pg_read_all_stats;
GRANT SELECT ON pce_t TO pce_plain, pce_stats_reader;
SELECT scan_seen() FROM pce_t WHERE g = 1;
SET ROLE pce_plain;
SELECT scan_seen() FROM pce_t WHERE g = 1;
SET ROLE pce_stats_reader;
SELECT scan_seen() FROM pce_t WHERE g = 1;
RESET ROLE;
REVOKE ALL ON pce_t FROM pce_plain, pce_stats_reader;
DROP ROLE pce_plain, pce_stats_reader;
DROP FUNCTION scan_seen();

-- relation residency
SELECT total_bytes = pg_relation_size('pce_t') AS total_matches,
       cached_bytes BETWEEN 0 AND total_bytes AS cached_in_range,
       method IN ('cachestat', 'mincore') AS known_method
  FROM cache_ext_relation_cache('pce_t');
SELECT cached_fraction FROM cache_ext_relation_cache('pce_mv'::regclass) WHERE false;
SELECT * FROM cache_ext_relation_cache(NULL);
SELECT * FROM cache_ext_relation_cache(0);
CREATE VIEW pce_v AS SELECT 1;
SELECT * FROM cache_ext_relation_cache('pce_v');
-- a non-superuser may look at tables it can read, not others
CREATE ROLE pce_nobody;
SET ROLE pce_nobody;
SELECT * FROM cache_ext_relation_cache('pce_t');
SELECT cache_ext_stats_reset();
SELECT count(*) > 0 AS can_read_stats FROM cache_ext_stats();
RESET ROLE;
-- ... unless granted, here through a role of its own
CREATE ROLE pce_admin;
GRANT EXECUTE ON FUNCTION cache_ext_stats_reset() TO pce_admin;
GRANT pce_admin TO pce_nobody;
SET ROLE pce_nobody;
SELECT cache_ext_stats_reset() IS NOT NULL AS granted_role_can_reset;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION cache_ext_stats_reset() FROM pce_admin;
DROP ROLE pce_admin;
DROP ROLE pce_nobody;
SELECT cache_ext_stats_reset() IS NOT NULL AS superuser_can_reset;
SELECT value AS copy_to_marks_after_reset FROM cache_ext_stats() WHERE name = 'marks_copy_to';

DROP VIEW pce_v;
DROP MATERIALIZED VIEW pce_mv;
DROP TABLE pce_t;
DROP FUNCTION my_mark(), scan_and_fail(), marks_of(text);
