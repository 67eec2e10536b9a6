/*-------------------------------------------------------------------------
 *
 * pg_cache_ext.c
 *		Module entry point: every GUC of pg_cache_ext, its shared memory, and
 *		the installation of the hooks and the background worker.
 *
 * pg_cache_ext keeps analytical work (large sequential scans, VACUUM,
 * pg_dump, base backups) from flushing the OS page cache that OLTP queries
 * live on.  Backends that scan put their PID into a pinned BPF map; the BPF
 * side (loaded by the privileged pg_cache_ext_loader) sends the folios those
 * PIDs bring in to an evict-first list (cache_ext kernels) or has them
 * dropped after a small budget (stock kernels).
 *
 * The module must be in shared_preload_libraries: it needs shared memory, a
 * background worker, and hooks in every backend.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pg_cache_ext_int.h"
#include "pce_paths.h"
#include "scan_commands.h"

PG_MODULE_MAGIC;

/* GUC variables */
int			pce_mode = PCE_MODE_AUTO;
char	   *pce_bpffs_dir = NULL;
char	   *pce_cgroup = NULL;
int			pce_scan_threshold = 0;
char	   *pce_scan_commands = NULL;
int			pce_scan_commands_mask = 0;
bool		pce_mark_autovacuum = true;
bool		pce_scans_join_vacuum = true;
bool		pce_scans_join_copy = true;
bool		pce_mark_basebackup = true;
int			pce_session_scan = PCE_SCAN_AUTO;
int			pce_scan_budget_mb = 32;
int			pce_scan_max_age_s = 60;
bool		pce_promote_on_access = PCE_KNOB_DEFAULT(promote_on_access);
bool		pce_drop_unread_wal_enabled = true;
int			pce_scan_min_percent = PCE_KNOB_DEFAULT(scan_min_percent);

PceShared  *pce_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* the modes' names are the loader's too (bpf/pce_modes.h) */
#define PCE_MODE_GUC_ENTRY(sym, name) {name, sym, false},
static const struct config_enum_entry mode_options[] = {
	PCE_MODE_TABLE(PCE_MODE_GUC_ENTRY)
	{NULL, 0, false}
};
#undef PCE_MODE_GUC_ENTRY

static const struct config_enum_entry session_scan_options[] = {
	{"auto", PCE_SCAN_AUTO, false},
	{"on", PCE_SCAN_ON, false},
	{"off", PCE_SCAN_OFF, false},
	{"true", PCE_SCAN_ON, true},
	{"false", PCE_SCAN_OFF, true},
	{"yes", PCE_SCAN_ON, true},
	{"no", PCE_SCAN_OFF, true},
	{"1", PCE_SCAN_ON, true},
	{"0", PCE_SCAN_OFF, true},
	{NULL, 0, false}
};

void		_PG_init(void);

static bool check_scan_commands(char **newval, void **extra, GucSource source);
static void assign_scan_commands(const char *newval, void *extra);
static bool check_bpffs_dir(char **newval, void **extra, GucSource source);
static bool check_cgroup(char **newval, void **extra, GucSource source);

/* One slot per PGPROC: the index is the process's pgprocno. */
static int
pce_nslots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

static Size
pce_shmem_size(void)
{
	return add_size(offsetof(PceShared, slots), mul_size(pce_nslots(), sizeof(PceScanSlot)));
}

static void
pce_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(pce_shmem_size());
	RequestNamedLWLockTranche("pg_cache_ext", 1);
}

static void
pce_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	pce_shared = ShmemInitStruct("pg_cache_ext", pce_shmem_size(), &found);
	if (!found)
	{
		memset(pce_shared, 0, pce_shmem_size());
		pce_shared->lock = &(GetNamedLWLockTranche("pg_cache_ext"))->lock;
		for (int i = 0; i < PCE_USTAT__COUNT; i++)
			pg_atomic_init_u64(&pce_shared->ustats[i], 0);
		for (int i = 0; i < PCE_REASON__COUNT; i++)
			pg_atomic_init_u64(&pce_shared->marks_by_reason[i], 0);
		pce_shared->stats_reset = GetCurrentTimestamp();
		pce_shared->started = pce_shared->stats_reset;
		pce_shared->nslots = pce_nslots();
		strlcpy(pce_shared->worker_status, "not started", sizeof(pce_shared->worker_status));
	}
	LWLockRelease(AddinShmemInitLock);

	/*
	 * In the postmaster, this runs at server start and again after a crash,
	 * once every child is gone: drop the marks of processes that died
	 * without unmarking (the one SIGKILLed among them), before crash
	 * recovery, which may take a while, lets the worker start.
	 */
	if (!IsUnderPostmaster)
	{
		int			removed = pce_remove_stale_marks(false);

		if (removed > 0)
			elog(LOG, "pg_cache_ext: removed %d scan marks of processes that are gone", removed);
	}
}

/*
 * Every GUC of the module, in one place: what is loaded and where, what
 * marks a backend, and how scan pages are evicted.
 */
static void
define_mechanism_gucs(void)
{
	DefineCustomEnumVariable("pg_cache_ext.mode",
							 "Which eviction mechanism to use: " PCE_MODE_CHOICES ".",
							 "auto uses whatever the loader put in place; stock or cache_ext "
							 "accept only that mechanism; off marks nothing and evicts nothing.",
							 &pce_mode, PCE_MODE_AUTO, mode_options,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("pg_cache_ext.bpffs_dir",
							   "Directory below which the loader pins the maps, one subdirectory per cluster.",
							   NULL,
							   &pce_bpffs_dir, PCE_DEFAULT_BPFFS_DIR,
							   PGC_POSTMASTER, 0, check_bpffs_dir, NULL, NULL);

	/* read by the loader, from this file, before the server starts */
	DefineCustomStringVariable("pg_cache_ext.cgroup",
							   "cgroup v2 directory the loader attaches the cache_ext policy to.",
							   "Empty: the cgroup the loader runs in (the cluster's systemd unit).",
							   &pce_cgroup, "",
							   PGC_POSTMASTER, 0, check_cgroup, NULL, NULL);
}

static void
define_marking_gucs(void)
{
	/* GUC keeps the pointer: static, and made from the table once */
	static char scan_commands_help[320];

	snprintf(scan_commands_help, sizeof(scan_commands_help),
			 "Comma-separated list of: %s; or all, or none.", pce_scan_command_words());
	/*
	 * The default is PostgreSQL's own bulk-read rule: a relation larger than
	 * a quarter of shared_buffers is read through a ring buffer.
	 * shared_buffers is already known when a preloaded library initialises.
	 */
	DefineCustomIntVariable("pg_cache_ext.scan_threshold",
							"Sequential scans of relations larger than this mark the backend as scanning.",
							"-1 disables plan-based marking, 0 marks every scan.",
							&pce_scan_threshold, Max(NBuffers / 4, 1), -1, INT_MAX,
							PGC_USERSET, GUC_UNIT_BLOCKS, NULL, NULL, NULL);

	DefineCustomStringVariable("pg_cache_ext.scan_commands",
							   "Utility commands that mark the backend as scanning.",
							   scan_commands_help,
							   &pce_scan_commands, "all",
							   PGC_USERSET, GUC_LIST_INPUT,
							   check_scan_commands, assign_scan_commands, NULL);

	DefineCustomBoolVariable("pg_cache_ext.mark_autovacuum",
							 "Mark autovacuum workers while they vacuum or analyze.",
							 NULL, &pce_mark_autovacuum, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("pg_cache_ext.mark_basebackup",
							 "Mark WAL senders while they send a base backup.",
							 NULL, &pce_mark_basebackup, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomEnumVariable("pg_cache_ext.scan",
							 "Mark this session's statements as scans: auto (by rule), on (always) or off (never).",
							 NULL, &pce_session_scan, PCE_SCAN_AUTO, session_scan_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("pg_cache_ext.scans_join_vacuum",
							 "Start a marked synchronized scan where a VACUUM of its table is reading.",
							 "Scans reading beside a VACUUM share its reads within the scan budget.",
							 &pce_scans_join_vacuum, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("pg_cache_ext.scans_join_copy",
							 "Start a marked synchronized scan where a marked COPY TO of its table is reading.",
							 "pg_dump's COPY reads from the first block, unsynchronized; scans beside it share its reads within the scan budget.",
							 &pce_scans_join_copy, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
}

/* the knobs among these reach BPF through status.c (PceSettings) */
static void
define_eviction_gucs(void)
{
	DefineCustomIntVariable("pg_cache_ext.scan_budget",
							"Page cache that pages brought in by scans may hold (stock-kernel mechanism).",
							NULL, &pce_scan_budget_mb, 32, 1, 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_MB, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_cache_ext.scan_max_age",
							"Pages brought in by scans are dropped after this long (stock-kernel mechanism).",
							"0 keeps them until the budget is exceeded.",
							&pce_scan_max_age_s, 60, 0, 24 * 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomBoolVariable("pg_cache_ext.promote_on_access",
							 "Keep a scan page when a backend that is not scanning touches it (cache_ext: move it "
							 "to the main list; stock kernel: the evictor does not drop it).",
							 NULL, &pce_promote_on_access, PCE_KNOB_DEFAULT(promote_on_access),
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_cache_ext.scan_min_percent",
							"Below this share of the cgroup's pages the scan list is not drained first (cache_ext).",
							NULL, &pce_scan_min_percent, PCE_KNOB_DEFAULT(scan_min_percent), 0,
							PCE_KNOB_MAX_scan_min_percent,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("pg_cache_ext.drop_unread_wal",
							 "Drop WAL from the page cache once flushed while no process reads WAL "
							 "(no WAL sender, no archiving, no replication slot, no WAL summarizer, not in recovery).",
							 NULL, &pce_drop_unread_wal_enabled, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
}

static void
pce_define_gucs(void)
{
	define_mechanism_gucs();
	define_marking_gucs();
	define_eviction_gucs();
	MarkGUCPrefixReserved("pg_cache_ext");
}

/*
 * The path GUCs follow the loader's one path rule (bpf/pce_paths.h), so that
 * a value the server accepts the loader accepts at boot, and the reverse.
 */
static bool
check_path_setting(const char *name, const char *value)
{
	const char *why = pce_path_problem(value);

	if (why)
		GUC_check_errdetail("%s is %s: use the plain absolute path.", name, why);
	return why == NULL;
}

static bool
check_bpffs_dir(char **newval, void **extra, GucSource source)
{
	return check_path_setting("pg_cache_ext.bpffs_dir", *newval);
}

/* empty: the loader's own cgroup */
static bool
check_cgroup(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	return check_path_setting("pg_cache_ext.cgroup", *newval);
}

static bool
check_scan_commands(char **newval, void **extra, GucSource source)
{
	char		bad[80];
	int			mask = pce_parse_scan_commands(*newval, bad, sizeof(bad));
	int		   *result;

	if (mask < 0)
	{
		if (bad[0])
			GUC_check_errdetail("Unrecognized command \"%s\": use %s, all or none.",
								bad, pce_scan_command_words());
		else
			GUC_check_errdetail("List syntax is invalid.");
		return false;
	}
	/* the GUC machinery frees extra: see pce_guc_malloc() in compat.h */
	result = (int *) pce_guc_malloc(sizeof(int));
	if (!result)
		return false;
	*result = mask;
	*extra = result;
	return true;
}

static void
assign_scan_commands(const char *newval, void *extra)
{
	pce_scan_commands_mask = *((int *) extra);
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_cache_ext must be loaded via shared_preload_libraries"),
				 errhint("Add pg_cache_ext to shared_preload_libraries in postgresql.conf and restart the server.")));

	pce_define_gucs();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = pce_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = pce_shmem_startup;

	pce_classify_init();
	pce_worker_register();
}
