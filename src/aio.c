/*-------------------------------------------------------------------------
 *
 * aio.c
 *		PostgreSQL 18+ asynchronous I/O: the pages a marked process reads
 *		are attributed to it however PostgreSQL performs the read.
 *
 * From 18 on, sequential scans, bitmap heap scans, VACUUM, ANALYZE and
 * COPY TO read through the AIO layer, in one of three ways (io_method):
 *
 *	sync		the backend reads itself: the BPF side sees the marked PID.
 *	io_uring	the backend submits to its ring; the kernel reads in the
 *				backend's context or punts the read to an io-wq thread of
 *				the backend (iou-wrk-N): the BPF side looks marks up by
 *				thread group, so those threads count as the backend.
 *	worker		(the default) an I/O worker process performs the read of an
 *				I/O the backend owns; a full queue or a file that cannot be
 *				reopened makes the backend read itself.
 *
 * For I/O workers the BPF side asks who owns the I/O the worker is
 * executing (maps.bpf.h, "Who read the page").  This file gives it what it
 * needs, through two maps (pg_cache_ext.h):
 *
 *	io_workers	the cluster's I/O workers, registered by the background
 *				worker from the backend status array every 250 ms (19 starts
 *				and stops workers as the load changes: a new worker's reads
 *				are attributed from its registration on), each with the
 *				addresses of error_context_stack and of the I/O handles and
 *				the layout of both, as this server was built;
 *	scan_owners	for every mark, its ProcNumber -> (PID, start time), written
 *				with the mark and removed with it (registry.c), only when the
 *				server uses I/O workers, so that other configurations pay
 *				nothing for it.
 *
 * Why the owner and not the file: publishing the scanned relations' files
 * and counting every I/O worker insertion into them as a scan page would
 * also take the pages of an unmarked backend that reads the same table at
 * the same time, and would need every relation a command reads (VACUUM's
 * indexes, a query's joins) to be known up front.  The owner is exact, per
 * I/O, and the same for every command: anything a marked process reads
 * through an I/O worker is its read.
 *
 * Every process of the cluster is forked from the postmaster (no
 * EXEC_BACKEND on Linux), so the addresses this process sees are those of
 * the I/O workers too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/backend_status.h"
#if PG_VERSION_NUM >= 180000
#include "storage/aio.h"
#include "storage/aio_internal.h"
#endif

#include "compat.h"
#include "pg_cache_ext_int.h"
#include "pce_proc_stat.h"

/*
 * Are reads performed by I/O workers on this server, so that marks need
 * their ProcNumber in scan_owners?  io_method is fixed at server start.
 */
bool
pce_aio_owner_marks(void)
{
#if PG_VERSION_NUM >= 180000
	return io_method == IOMETHOD_WORKER;
#else
	return false;
#endif
}

/* With the mark of pid (made just before): its ProcNumber for I/O it owns. */
void
pce_aio_mark_owner(int procno, int pid, uint64 proc_start_ticks)
{
	struct pce_scan_owner owner = {0};
	int			err;

	if (!pce_aio_owner_marks() || procno < 0)
		return;
	owner.proc_start_ticks = proc_start_ticks;
	owner.pid = (__u32) pid;
	err = pce_map_put(PCE_PIN_SCAN_OWNERS, (__u32) procno, &owner);
	if (err == E2BIG)
		pce_count(PCE_USTAT_MAP_FULL, 1);
	else if (err != 0 && err != ENODEV)
		pce_count(PCE_USTAT_MAP_ERRORS, 1);
}

/* Before the mark of pid goes: its ProcNumber's entry, if still its own. */
void
pce_aio_unmark_owner(int procno, int pid)
{
	struct pce_scan_owner owner;

	if (!pce_aio_owner_marks() || procno < 0)
		return;
	if (pce_map_get(PCE_PIN_SCAN_OWNERS, (__u32) procno, &owner) && owner.pid == (__u32) pid)
		(void) pce_map_remove(PCE_PIN_SCAN_OWNERS, (__u32) procno);
}

/*
 * Remove scan_owners entries of processes that are gone (a mark that was
 * never unmarked; the BPF side ignores them anyway, since their mark is
 * gone or another process's).  Returns how many were removed.
 */
int
pce_aio_remove_stale_owners(void)
{
	static __u32 procnos[PCE_MAX_SCAN_PIDS];
	int			n = pce_map_keys(PCE_PIN_SCAN_OWNERS, procnos, PCE_MAX_SCAN_PIDS);
	int			removed = 0;

	for (int i = 0; i < n; i++)
	{
		struct pce_scan_owner owner;

		if (!pce_map_get(PCE_PIN_SCAN_OWNERS, procnos[i], &owner))
			continue;
		if (pce_proc_start_ticks((int) owner.pid) == owner.proc_start_ticks)
			continue;
		if (pce_map_remove(PCE_PIN_SCAN_OWNERS, procnos[i]) == 0)
			removed++;
	}
	return removed;
}

#if PG_VERSION_NUM >= 180000

/* I/O workers this process registered in io_workers (the background worker) */
static __u32 registered[PCE_MAX_IO_WORKERS];
static int	nregistered = 0;

/* Where the BPF side finds, in an I/O worker, the I/O it executes. */
static bool
io_worker_layout(int pid, struct pce_io_worker *w)
{
	memset(w, 0, sizeof(*w));
	if (pgaio_ctl == NULL || pgaio_ctl->io_handles == NULL)
		return false;
	w->proc_start_ticks = pce_proc_start_ticks(pid);
	w->error_context_stack = (__u64) (uintptr_t) &error_context_stack;
	w->io_handles = (__u64) (uintptr_t) pgaio_ctl->io_handles;
	w->io_handle_count = pgaio_ctl->io_handle_count;
	w->io_handle_size = sizeof(PgAioHandle);
	w->owner_offset = offsetof(PgAioHandle, owner_procno);
	w->context_arg_offset = offsetof(ErrorContextCallback, arg);
	w->context_previous_offset = offsetof(ErrorContextCallback, previous);
	return w->proc_start_ticks != 0;
}

static bool
is_registered(__u32 pid)
{
	for (int i = 0; i < nregistered; i++)
		if (registered[i] == pid)
			return true;
	return false;
}

/* The I/O workers alive now, from the backend status array; how many. */
static int
live_io_workers(__u32 *pids, int max)
{
	int			n = 0;
	int			nbackends;

	pgstat_clear_backend_activity_snapshot();
	nbackends = pgstat_fetch_stat_numbackends();
	for (int i = 1; i <= nbackends && n < max; i++)
	{
		LocalPgBackendStatus *local = pce_local_beentry(i);

		if (local && local->backendStatus.st_backendType == B_IO_WORKER &&
			local->backendStatus.st_procpid > 0)
			pids[n++] = (__u32) local->backendStatus.st_procpid;
	}
	pgstat_clear_backend_activity_snapshot();
	return n;
}

/*
 * Background worker, every 250 ms: io_workers holds exactly the live I/O
 * workers.  Entries this process did not make (a previous worker's, before
 * a restart) are replaced or removed too.
 */
void
pce_aio_register_workers(void)
{
	__u32		live[PCE_MAX_IO_WORKERS];
	__u32		in_map[PCE_MAX_IO_WORKERS];
	int			nlive,
				nmap;

	if (!pce_aio_owner_marks() || !pce_maps_open(false))
		return;
	nlive = live_io_workers(live, PCE_MAX_IO_WORKERS);
	nregistered = 0;
	for (int i = 0; i < nlive; i++)
	{
		struct pce_io_worker w;
		struct pce_io_worker old;

		if (!io_worker_layout((int) live[i], &w))
			continue;
		if (!(pce_map_get(PCE_PIN_IO_WORKERS, live[i], &old) && memcmp(&old, &w, sizeof(w)) == 0) &&
			pce_map_put(PCE_PIN_IO_WORKERS, live[i], &w) != 0)
		{
			pce_count(PCE_USTAT_MAP_ERRORS, 1);
			continue;
		}
		registered[nregistered++] = live[i];
	}
	nmap = pce_map_keys(PCE_PIN_IO_WORKERS, in_map, PCE_MAX_IO_WORKERS);
	for (int i = 0; i < nmap; i++)
		if (!is_registered(in_map[i]))
			(void) pce_map_remove(PCE_PIN_IO_WORKERS, in_map[i]);
}

#else							/* before 18: backends read themselves */

void
pce_aio_register_workers(void)
{
}

#endif

/* The attribution row of cache_ext_status(): how reads reach their mark. */
const char *
pce_aio_attribution(char *buf, size_t len)
{
#if PG_VERSION_NUM >= 180000
	const char *method = GetConfigOption("io_method", true, false);

	if (!pce_aio_owner_marks())
	{
		snprintf(buf, len, "io_method = %s: by the reading process and its threads "
				 "(io_uring worker threads count as their process)", method ? method : "?");
		return buf;
	}
	{
		__u32		keys[PCE_MAX_IO_WORKERS];
		int			n = pce_map_keys(PCE_PIN_IO_WORKERS, keys, PCE_MAX_IO_WORKERS);

		if (n < 0)
			snprintf(buf, len, "io_method = worker: by the reading process, and I/O workers by "
					 "the owner of the I/O they perform (maps unavailable)");
		else
			snprintf(buf, len, "io_method = worker: by the reading process, and I/O workers by "
					 "the owner of the I/O they perform (%d I/O workers registered)", n);
	}
	return buf;
#else
	snprintf(buf, len, "by the reading process (PostgreSQL %d reads synchronously in the backend)",
			 PG_VERSION_NUM / 10000);
	return buf;
#endif
}
