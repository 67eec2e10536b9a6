-- cache_ext_status() on the test cluster: the loader has run, so the
-- mechanism the kernel supports is active.  The expected mechanism is
-- derived from what the kernel has, so this holds on both kinds of kernel.
SELECT value AS state FROM cache_ext_status() WHERE name = 'state';
SELECT (SELECT value FROM cache_ext_status() WHERE name = 'mechanism') =
       CASE (SELECT value FROM cache_ext_status() WHERE name = 'kernel_has_cache_ext')
            WHEN 'yes' THEN 'cache_ext' ELSE 'stock' END AS mechanism_matches_kernel;
SELECT value LIKE 'reachable (pid %' AS loader_reachable
  FROM cache_ext_status() WHERE name = 'loader';
SELECT value ~ ('^/run/pg_cache_ext/pins/' || (SELECT system_identifier FROM pg_control_system()) || '-[0-9]+-[0-9]+$') AS pin_dir_has_cluster_id
  FROM cache_ext_status() WHERE name = 'pin_dir';
SELECT value LIKE 'pid %' AS worker_running FROM cache_ext_status() WHERE name = 'worker';
-- every counter is there, none negative
SELECT count(*) >= 30 AS enough_counters, bool_and(value >= 0) AS none_negative
  FROM cache_ext_stats();
-- on 5.19+ kernels the sysctl does not keep the server out
SELECT value ~ '^kernel.unprivileged_bpf_disabled = [0-9]: fine' AS unprivileged_bpf_fine
  FROM cache_ext_status() WHERE name = 'unprivileged_bpf';
SELECT value::timestamptz <= now() AS stats_since_is_a_past_time
  FROM cache_ext_status() WHERE name = 'stats_since';
-- how reads are attributed (PostgreSQL 18's I/O workers included): said, no warning
SELECT value ~ '^(by the reading process|io_method = (sync|io_uring|worker): by the reading process)'
       AS attribution_said,
       (SELECT count(*) FROM cache_ext_status() WHERE name = 'warning') AS warnings
  FROM cache_ext_status() WHERE name = 'attribution';
