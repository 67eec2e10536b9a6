/*-------------------------------------------------------------------------
 *
 * functions.c
 *		SQL-callable functions of pg_cache_ext.
 *
 *	cache_ext_status()				what is in force, and why
 *	cache_ext_stats()				counters, from the BPF side and from ours
 *	cache_ext_stats_reset()			reset our counters (superuser, or granted)
 *	cache_ext_stats_reset_time()	when they were last reset (1.1)
 *	cache_ext_scans()				backends and outside process trees marked now
 *	cache_ext_relation_cache(rel)	how much of a relation is in the page cache
 *
 * None of these raise an error because the BPF side is missing: they
 * report it.
 *
 * cache_ext_scans() shows what pg_stat_activity and the progress views
 * show: to everyone, which process is marked, for what kind of work and in
 * which database; what it scans and since when only to roles that have
 * the privileges of the process's role or of pg_read_all_stats.
 * cache_ext_relation_cache() wants SELECT on the relation, checked before
 * the relation is locked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>


#include "access/relation.h"
#include "catalog/pg_authid.h"
#include "common/relpath.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pg_cache_ext_int.h"

PG_FUNCTION_INFO_V1(cache_ext_status);
PG_FUNCTION_INFO_V1(cache_ext_stats);
PG_FUNCTION_INFO_V1(cache_ext_stats_reset);
PG_FUNCTION_INFO_V1(cache_ext_stats_reset_time);
PG_FUNCTION_INFO_V1(cache_ext_scans);
PG_FUNCTION_INFO_V1(cache_ext_relation_cache);

static const char *const bpf_stat_names[PCE_STAT__COUNT] = PCE_STAT_NAMES;

#define USTAT_NAME_ENTRY(sym, name) [PCE_USTAT_##sym] = name,
static const char *const ustat_names[PCE_USTAT__COUNT] = {PCE_USTAT_TABLE(USTAT_NAME_ENTRY)};
#undef USTAT_NAME_ENTRY

static void
put_text_row(ReturnSetInfo *rsinfo, const char *name, const char *value)
{
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = CStringGetTextDatum(name);
	if (value)
		values[1] = CStringGetTextDatum(value);
	else
		nulls[1] = true;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

static void
put_count_row(ReturnSetInfo *rsinfo, const char *name, uint64 value)
{
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = CStringGetTextDatum(name);
	values[1] = Int64GetDatum((int64) value);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * kernel.unprivileged_bpf_disabled, and whether it matters: from 5.19 on,
 * opening a pinned map is governed by the pin's file mode alone; before,
 * a non-zero value keeps the unprivileged server out of the maps.
 */
static const char *
unprivileged_bpf_note(const char *release, char *buf, size_t len)
{
	int			major = 0,
				minor = 0;
	int			value = -1;
	FILE	   *f = fopen("/proc/sys/kernel/unprivileged_bpf_disabled", "r");

	if (f)
	{
		if (fscanf(f, "%d", &value) != 1)
			value = -1;
		fclose(f);
	}
	sscanf(release, "%d.%d", &major, &minor);
	if (value <= 0)
		snprintf(buf, len, "kernel.unprivileged_bpf_disabled = %d: fine", value < 0 ? 0 : value);
	else if (major > 5 || (major == 5 && minor >= 19))
		snprintf(buf, len, "kernel.unprivileged_bpf_disabled = %d: fine on this kernel (5.19+)", value);
	else
		snprintf(buf, len, "kernel.unprivileged_bpf_disabled = %d: this kernel (< 5.19) needs 0 for the server to open the maps", value);
	return buf;
}

/* Is the multi-generational LRU on?  Then the kernel activates no folio. */
static bool
mglru_enabled(void)
{
	FILE	   *f = fopen("/sys/kernel/mm/lru_gen/enabled", "r");
	unsigned int bits = 0;

	if (!f)
		return false;
	if (fscanf(f, "%x", &bits) != 1)
		bits = 0;
	fclose(f);
	return bits != 0;
}

/* Are scan pages that other backends use kept (promoted)?  If not, why. */
static const char *
promotion_note(enum pce_mechanism mech, const PceSettings *settings,
			   const struct pce_loader_info *info)
{
	if (mech == PCE_MECH_NONE)
		return NULL;
	if (!settings->promote_on_access)
		return "off (pg_cache_ext.promote_on_access)";
	if (mech == PCE_MECH_CACHE_EXT)
		return "on: the policy moves a scan folio that another task touches to its main list";
	if (!pce_pin_present(PCE_PIN_TRACKER_ACTIVATE_LINK))
		return "unavailable: the loader could not attach a promotion program (see its output)";
	if (info->read_hook != PCE_READ_HOOK_NONE)
		return "on: scan pages another backend reads are kept";
	if (mglru_enabled())
		return "on, but MGLRU is enabled: the kernel activates no folio, so none is promoted";
	return "on: scan pages the kernel activates for another backend are kept (no read hook: the activation may be seen in the wrong task)";
}

/*
 * cache_ext_status(): one row per fact, (name, value).
 */
Datum
cache_ext_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	struct pce_loader_info info;
	enum pce_mechanism mech;
	struct utsname uts;
	char		buf[512];
	const char *reason;
	char		worker_status[256];
	int			worker_pid;
	bool		maps_ok;
	PceSettings settings;

	InitMaterializedSRF(fcinfo, 0);

	pce_settings_snapshot(&settings);
	maps_ok = pce_maps_open(true);
	mech = pce_current_mechanism(&settings, &reason, &info);

	put_text_row(rsinfo, "state", mech != PCE_MECH_NONE ? "active" : "idle");
	put_text_row(rsinfo, "reason", reason);
	put_text_row(rsinfo, "mode", pce_mode_name(settings.mode));
	put_text_row(rsinfo, "mechanism", pce_mechanism_name(mech));
	uname(&uts);
	put_text_row(rsinfo, "kernel", uts.release);
	put_text_row(rsinfo, "kernel_has_cache_ext", pce_kernel_btf_has_cache_ext() ? "yes" : "no");
	put_text_row(rsinfo, "unprivileged_bpf", unprivileged_bpf_note(uts.release, buf, sizeof(buf)));
	if (info.abi_version == PCE_ABI_VERSION)
	{
		snprintf(buf, sizeof(buf), "reachable (pid %u, loaded at %s)", info.loader_pid,
				 timestamptz_to_str(time_t_to_timestamptz((pg_time_t) info.loaded_at_unix)));
		put_text_row(rsinfo, "loader", buf);
	}
	else
		put_text_row(rsinfo, "loader", "not reachable");
	put_text_row(rsinfo, "pin_dir", pce_pin_dir());
	put_text_row(rsinfo, "cgroup", info.cgroup[0] ? info.cgroup : NULL);
	put_text_row(rsinfo, "promotion", promotion_note(mech, &settings, &info));
	put_text_row(rsinfo, "read_hook", mech == PCE_MECH_STOCK ? pce_read_hook_program_name(info.read_hook) : NULL);
	if (maps_ok)
	{
		snprintf(buf, sizeof(buf), "%d", Max(pce_map_walk_marks(NULL, NULL), 0));
		put_text_row(rsinfo, "kernel_map_entries", buf);
	}
	else
		put_text_row(rsinfo, "kernel_map_entries", NULL);

	LWLockAcquire(pce_shared->lock, LW_SHARED);
	strlcpy(worker_status, pce_shared->worker_status, sizeof(worker_status));
	worker_pid = pce_shared->worker_pid;
	LWLockRelease(pce_shared->lock);
	snprintf(buf, sizeof(buf), "pid %d: %s", worker_pid, worker_status);
	put_text_row(rsinfo, "worker", buf);
	/* counters start at zero at server start, crash restart and reset */
	put_text_row(rsinfo, "stats_since", timestamptz_to_str(pce_shared->stats_reset));

	put_text_row(rsinfo, "attribution", pce_aio_attribution(buf, sizeof(buf)));

	return (Datum) 0;
}

/*
 * cache_ext_stats(): (name, value) for every counter.
 */
Datum
cache_ext_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	uint64		bpf_stats[PCE_STAT__COUNT];
	char		name[64];
	PceSettings settings;

	InitMaterializedSRF(fcinfo, 0);

	pce_map_read_stats(bpf_stats);
	for (int i = 0; i < PCE_STAT__COUNT; i++)
	{
		if (bpf_stat_names[i])	/* an unused counter has no name */
			put_count_row(rsinfo, bpf_stat_names[i], bpf_stats[i]);
	}
	for (int i = 0; i < PCE_USTAT__COUNT; i++)
		put_count_row(rsinfo, ustat_names[i], pg_atomic_read_u64(&pce_shared->ustats[i]));
	for (int i = 1; i < PCE_REASON__COUNT; i++)
	{
		snprintf(name, sizeof(name), "marks_%s", pce_reason_names[i]);
		put_count_row(rsinfo, name, pg_atomic_read_u64(&pce_shared->marks_by_reason[i]));
	}
	LWLockAcquire(pce_shared->lock, LW_SHARED);
	put_count_row(rsinfo, "extents_tracked", pce_shared->extents_tracked);
	put_count_row(rsinfo, "bytes_tracked", pce_shared->bytes_tracked);
	LWLockRelease(pce_shared->lock);
	pce_settings_snapshot(&settings);
	put_count_row(rsinfo, "budget_bytes", (uint64) settings.scan_budget_mb * 1024 * 1024);
	return (Datum) 0;
}

/*
 * cache_ext_stats_reset(): zero the module's counters.  The BPF counters
 * are cumulative since the loader created the maps.
 */
Datum
cache_ext_stats_reset(PG_FUNCTION_ARGS)
{
	for (int i = 0; i < PCE_USTAT__COUNT; i++)
		pg_atomic_write_u64(&pce_shared->ustats[i], 0);
	for (int i = 0; i < PCE_REASON__COUNT; i++)
		pg_atomic_write_u64(&pce_shared->marks_by_reason[i], 0);
	pce_shared->stats_reset = GetCurrentTimestamp();
	PG_RETURN_TIMESTAMPTZ(pce_shared->stats_reset);
}

/*
 * cache_ext_stats_reset_time(): since when the module's counters count
 * (server start, crash restart or cache_ext_stats_reset()), the
 * stats_reset column of pg_stat_cache_ext.
 */
Datum
cache_ext_stats_reset_time(PG_FUNCTION_ARGS)
{
	PG_RETURN_TIMESTAMPTZ(pce_shared->stats_reset);
}

/*
 * cache_ext_scans(): one row per marked process.
 *
 * pid, reason and database are shown for every row, as pg_stat_activity
 * shows pid and datid and the progress views show which command runs.  The
 * relation, since when and whether the kernel map has it are shown only
 * for rows of roles whose privileges the caller has, or to members of
 * pg_read_all_stats (pg_stat_activity's rule); NULL otherwise.  The
 * relation is named only for rows of the caller's database: an OID from
 * another database would be resolved in this one.  Then the tasks of
 * process trees outside the server (reason external), with their command.
 */
/* What put_external_row needs: the result and whether details may be shown. */
typedef struct ExternalRows
{
	ReturnSetInfo *rsinfo;
	bool		read_all_stats;
} ExternalRows;

/* The command name of a process (/proc/<pid>/comm), or false if gone. */
static bool
process_command(__u32 pid, char *buf, size_t len)
{
	char		path[64];
	FILE	   *f;
	bool		ok;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	ok = fgets(buf, len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

/*
 * One row per task of a process tree outside the server (pg_cache_ext_run):
 * their marks are in the kernel map only.  They have no role, so what they
 * run and since when are details for pg_read_all_stats, like another
 * role's backend.
 */
static bool
put_external_row(__u32 pid, const struct pce_scan_mark *mark, void *arg)
{
	ExternalRows *rows = (ExternalRows *) arg;
	Datum		values[7];
	bool		nulls[7] = {0};
	char		command[64];

	if (mark->reason != PCE_REASON_EXTERNAL || !process_command(pid, command, sizeof(command)))
		return true;
	values[0] = Int32GetDatum((int32) pid);
	values[1] = CStringGetTextDatum(pce_reason_names[PCE_REASON_EXTERNAL]);
	nulls[2] = nulls[3] = true;
	if (rows->read_all_stats)
	{
		values[4] = TimestampTzGetDatum((TimestampTz) mark->marked_at_us);
		values[5] = BoolGetDatum(true);
		values[6] = CStringGetTextDatum(command);
	}
	else
		nulls[4] = nulls[5] = nulls[6] = true;
	tuplestore_putvalues(rows->rsinfo->setResult, rows->rsinfo->setDesc, values, nulls);
	return true;
}

Datum
cache_ext_scans(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PceScanSlot *copy;
	int			nslots;
	bool		read_all_stats;
	ExternalRows external;

	InitMaterializedSRF(fcinfo, 0);
	read_all_stats = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

	nslots = pce_shared->nslots;
	copy = palloc(sizeof(PceScanSlot) * nslots);
	LWLockAcquire(pce_shared->lock, LW_SHARED);
	memcpy(copy, pce_shared->slots, sizeof(PceScanSlot) * nslots);
	LWLockRelease(pce_shared->lock);

	for (int i = 0; i < nslots; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {0};
		PceScanSlot *slot = &copy[i];

		if (slot->pid == 0)
			continue;

		/* shown to everyone */
		values[0] = Int32GetDatum(slot->pid);
		values[1] = CStringGetTextDatum(slot->reason < PCE_REASON__COUNT ?
										pce_reason_names[slot->reason] : "unknown");
		values[3] = ObjectIdGetDatum(slot->dboid);
		nulls[3] = !OidIsValid(slot->dboid);

		if (read_all_stats || has_privs_of_role(GetUserId(), slot->userid))
		{
			values[2] = ObjectIdGetDatum(slot->relid);
			nulls[2] = !OidIsValid(slot->relid) || slot->dboid != MyDatabaseId;
			values[4] = TimestampTzGetDatum(slot->since);
			values[5] = BoolGetDatum(pce_map_has_mark((__u32) slot->pid));
		}
		else
			nulls[2] = nulls[4] = nulls[5] = true;
		nulls[6] = true;		/* a backend: pg_stat_activity says what it runs */
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	external.rsinfo = rsinfo;
	external.read_all_stats = read_all_stats;
	(void) pce_map_walk_marks(put_external_row, &external);
	return (Datum) 0;
}

/* ---- relation residency ---- */

/*
 * Error out unless the current role may read relation relid.  Privileges
 * are checked first, without a lock: a role that may not read the relation
 * must not be able to queue behind, or in front of, an AccessExclusiveLock
 * on it.
 */
static void
check_relation_readable(Oid relid)
{
	AclResult	aclresult;
	bool		is_missing = false;

	aclresult = pg_class_aclcheck_ext(relid, GetUserId(), ACL_SELECT, &is_missing);
	if (is_missing)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (aclresult != ACLCHECK_OK)
	{
		char	   *relname = get_rel_name(relid);

		if (relname == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation with OID %u does not exist", relid)));
		aclcheck_error(aclresult, get_relkind_objtype(get_rel_relkind(relid)), relname);
	}
}

Datum
cache_ext_relation_cache(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	rel;
	char		base[MAXPGPATH];
	uint64		total = 0,
				cached = 0,
				dirty = 0;
	const char *method = "cachestat";
	Datum		values[5];
	bool		nulls[5] = {0};

	InitMaterializedSRF(fcinfo, 0);

	check_relation_readable(relid);

	rel = try_relation_open(relid, AccessShareLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (!RELKIND_HAS_STORAGE(rel->rd_rel->relkind))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation \"%s\" has no storage", RelationGetRelationName(rel))));

	pce_relpath(base, sizeof(base), PCE_REL_FILE(rel), rel->rd_backend, MAIN_FORKNUM);
	for (int segno = 0;; segno++)
	{
		char		path[MAXPGPATH];
		struct stat st;
		int			fd;

		if (segno == 0)
			snprintf(path, sizeof(path), "%s/%s", DataDir, base);
		else
			snprintf(path, sizeof(path), "%s/%s.%d", DataDir, base, segno);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		if (fstat(fd, &st) == 0)
		{
			total += st.st_size;
			pce_file_residency(fd, st.st_size, &cached, &dirty, &method);
		}
		close(fd);
	}
	relation_close(rel, AccessShareLock);

	values[0] = Int64GetDatum((int64) total);
	values[1] = Int64GetDatum((int64) cached);
	values[2] = Int64GetDatum((int64) dirty);
	if (total > 0)
		values[3] = Float8GetDatum((double) cached / (double) total);
	else
		nulls[3] = true;
	values[4] = CStringGetTextDatum(method);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
