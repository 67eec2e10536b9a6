/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The background worker: the unprivileged, long-running half of
 *		pg_cache_ext inside the server.
 *
 * Every loop (at least every 100 ms, sooner when the tracker has records):
 *	- reopen the pinned maps if the loader was rerun; write the knobs from
 *	  the GUCs when the maps appear and after every reload;
 *	- with the stock-kernel mechanism, drain the tracker's ring buffer and
 *	  keep scan pages within budget, after every batch of records read
 *	  (evictor.c);
 *	- every 250 ms, remove marks of processes that are gone (SIGKILL,
 *	  crash) and mark autovacuum workers and base-backup WAL senders, which
 *	  run no hook of ours, while they do that work; register the I/O
 *	  workers of PostgreSQL 18+ (aio.c); drop the WAL no process will
 *	  read (wal.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pg_cache_ext_int.h"

#define LOOP_TIMEOUT_MS		100
#define HOUSEKEEPING_MS		250
#define MAX_BG_MARKS		64

/* Background processes this worker has marked. */
typedef struct BgMark
{
	int			pid;
	int			procno;
	uint64		start_ticks;	/* which process had that PID */
} BgMark;

static BgMark bg_marks[MAX_BG_MARKS];
static int	nbg_marks = 0;

void
pce_worker_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	/* from postmaster start: after a crash it must clean up stale marks at once */
	worker.bgw_start_time = BgWorkerStart_PostmasterStart;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "pg_cache_ext", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "pce_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pg_cache_ext worker", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pg_cache_ext worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

static void
set_worker_status(const char *fmt,...) pg_attribute_printf(1, 2);

static void
set_worker_status(const char *fmt,...)
{
	char		buf[256];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	if (strcmp(pce_shared->worker_status, buf) != 0)
	{
		strlcpy(pce_shared->worker_status, buf, sizeof(pce_shared->worker_status));
		LWLockRelease(pce_shared->lock);
		elog(LOG, "pg_cache_ext worker: %s", buf);
		return;
	}
	LWLockRelease(pce_shared->lock);
}

static int
find_bg_mark(int pid)
{
	for (int i = 0; i < nbg_marks; i++)
		if (bg_marks[i].pid == pid)
			return i;
	return -1;
}

/*
 * Mark background processes that started such work, unmark those done;
 * and, from the same snapshot, where the VACUUMs are (lap_start.c).
 */
static void
mark_background_processes(void)
{
	int			n;
	bool		still[MAX_BG_MARKS] = {0};

	pgstat_clear_backend_activity_snapshot();
	n = pgstat_fetch_stat_numbackends();
	for (int i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *local = pce_local_beentry(i);
		PgBackendStatus *be;
		enum pce_reason reason;
		int			idx;

		if (!local)
			continue;
		be = &local->backendStatus;
		reason = pce_background_reason(be);
		if (reason == PCE_REASON_NONE)
			continue;
		idx = find_bg_mark(be->st_procpid);
		if (idx >= 0)
		{
			still[idx] = true;
			continue;
		}
		if (nbg_marks < MAX_BG_MARKS)
		{
			PGPROC	   *proc = BackendPidGetProc(be->st_procpid);
			uint64		start_ticks;

			if (!proc)
				continue;
			/* remembered even if the kernel map refused it, to unmark later */
			start_ticks = pce_mark_other(be->st_procpid, PCE_PROCNO(proc), reason,
										 be->st_progress_command_target,
										 be->st_databaseid, be->st_userid);
			if (start_ticks == 0)
				continue;		/* gone already */
			bg_marks[nbg_marks].pid = be->st_procpid;
			bg_marks[nbg_marks].procno = PCE_PROCNO(proc);
			bg_marks[nbg_marks].start_ticks = start_ticks;
			still[nbg_marks] = true;
			nbg_marks++;
		}
	}
	for (int i = nbg_marks - 1; i >= 0; i--)
	{
		if (still[i])
			continue;
		pce_unmark_other(bg_marks[i].pid, bg_marks[i].procno, bg_marks[i].start_ticks);
		bg_marks[i] = bg_marks[--nbg_marks];
	}
	pce_publish_vacuum_blocks(n);
	pce_publish_copy_blocks();
	pgstat_clear_backend_activity_snapshot();
}

/* One loop's work for the mechanism in force, and the status line saying it. */
static void
run_mechanism(enum pce_mechanism mech, const char *why, const PceSettings *settings)
{
	if (mech == PCE_MECH_STOCK)
	{
		if (pce_evictor_start())
		{
			pce_evictor_run(settings);
			set_worker_status("stock-kernel evictor running (budget %d MB)", settings->scan_budget_mb);
		}
		else
			set_worker_status("cannot open the tracker's ring buffer: %m");
	}
	else
	{
		pce_evictor_stop();
		pce_evictor_forget_all();
		if (mech == PCE_MECH_CACHE_EXT)
			set_worker_status("cache_ext policy in the kernel; worker keeps knobs and marks");
		else
			set_worker_status("idle: %s", why ? why : "no mechanism");
	}
}

void
pce_worker_main(Datum arg)
{
	TimestampTz last_housekeeping = 0;
	bool		knobs_written = false;
	uint64		knobs_generation = 0;
	PceSettings settings;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/*
	 * The evictor pins the buffers it writes (pce_write_dirty_blocks).  As
	 * in the bgwriter, an owner without transactions whose pins and buffer
	 * I/O are released when the process exits, even on an error.
	 */
	CreateAuxProcessResourceOwner();

	LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	pce_shared->worker_pid = MyProcPid;
	LWLockRelease(pce_shared->lock);

	/* probe the kernel once for the cluster, before any backend asks */
	(void) pce_kernel_btf_has_cache_ext();
	pce_settings_snapshot(&settings);

	for (;;)
	{
		const char *why;
		enum pce_mechanism mech;
		int			wait_fd;
		int			events = WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH;
		TimestampTz now;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			pce_settings_snapshot(&settings);
			knobs_written = false;
		}

		mech = pce_current_mechanism(&settings, &why, NULL);
		/* write the knobs after a reload and into every newly opened map */
		if (pce_maps_generation() != knobs_generation)
			knobs_written = false;
		if (!knobs_written && pce_maps_open(false))
		{
			struct pce_knobs knobs;

			pce_knobs_from_settings(&settings, &knobs);
			knobs_written = pce_map_write_knobs(&knobs);
			knobs_generation = pce_maps_generation();
		}

		run_mechanism(mech, why, &settings);

		now = GetCurrentTimestamp();
		if (TimestampDifferenceExceeds(last_housekeeping, now, HOUSEKEEPING_MS))
		{
			pce_remove_stale_marks(true);
			mark_background_processes();
			pce_aio_register_workers();
			pce_close_written_files();
			pce_drop_unread_wal(settings.mode != PCE_MODE_OFF && settings.drop_unread_wal);
			last_housekeeping = now;
		}

		wait_fd = pce_evictor_fd();
		if (wait_fd >= 0)
			events |= WL_SOCKET_READABLE;
		(void) WaitLatchOrSocket(MyLatch, events, wait_fd, LOOP_TIMEOUT_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
