-- GUCs: defaults, bounds, bad values.
SHOW pg_cache_ext.mode;
SHOW pg_cache_ext.scan;
SHOW pg_cache_ext.scan_commands;
SHOW pg_cache_ext.scan_budget;
SHOW pg_cache_ext.cgroup;
-- the threshold defaults to a quarter of shared_buffers
SELECT pg_size_bytes(current_setting('pg_cache_ext.scan_threshold')) =
       pg_size_bytes(current_setting('shared_buffers')) / 4
       AS threshold_is_quarter_of_shared_buffers;
-- server-wide settings cannot be changed in a session
SET pg_cache_ext.mode = off;
SET pg_cache_ext.scan_budget = '64MB';
SET pg_cache_ext.bpffs_dir = '/tmp';
-- bad values are refused with a clear message
SET pg_cache_ext.scan = maybe;
SET pg_cache_ext.scan_threshold = -2;
SET pg_cache_ext.scan_threshold = '100TB';
SET pg_cache_ext.scan_commands = 'vacuum, bogus';
SET pg_cache_ext.scan_commands = 'vacuum,,analyze';
-- good values are taken
SET pg_cache_ext.scan_commands = 'VACUUM, copy_to';
SHOW pg_cache_ext.scan_commands;
SET pg_cache_ext.scan_commands = '';
SET pg_cache_ext.scan_commands = none;
SET pg_cache_ext.scan_threshold = -1;
SET pg_cache_ext.scan_threshold = '8MB';
SHOW pg_cache_ext.scan_threshold;
SET pg_cache_ext.scan = on;
RESET ALL;
-- the prefix is reserved: a misspelt setting is an error, not a silent no-op
SET pg_cache_ext.scan_treshold = 10;
-- server-wide settings past their bounds are refused by ALTER SYSTEM too
ALTER SYSTEM SET pg_cache_ext.scan_min_percent = 101;
ALTER SYSTEM SET pg_cache_ext.scan_budget = 0;
ALTER SYSTEM SET pg_cache_ext.scan_max_age = -1;
ALTER SYSTEM SET pg_cache_ext.drop_unread_wal = maybe;
ALTER SYSTEM SET pg_cache_ext.mode = sometimes;
ALTER SYSTEM SET pg_cache_ext.bpffs_dir = 'relative/path';
ALTER SYSTEM SET pg_cache_ext.cgroup = 'relative/path';
ALTER SYSTEM SET pg_cache_ext.cgroup = '/sys/fs/cgroup/../etc';
