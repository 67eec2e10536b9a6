-- The extension installs and its functions exist.
CREATE EXTENSION pg_cache_ext;
SELECT proname FROM pg_proc
 WHERE proname LIKE 'cache_ext%' ORDER BY proname;
-- state-changing functions are not for PUBLIC
SELECT has_function_privilege('public', 'cache_ext_stats_reset()', 'EXECUTE') AS public_can_reset;
