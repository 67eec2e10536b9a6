/*-------------------------------------------------------------------------
 *
 * registry.c
 *		Marking and unmarking PIDs as scanning.
 *
 * A mark is one update of the pinned scan-PID map (what the kernel side
 * acts on) plus a slot in shared memory (what cache_ext_scans() shows).
 * Nothing here ever raises an error: a missing loader or a full map only
 * bumps a counter, because the database must never fail a query on our
 * account.
 *
 * A process is marked by its own statements (classify.c) and, for work
 * that runs no hook of ours, by the background worker (worker.c); both may
 * hold the same process's mark at once, and the mark lasts until the last
 * holder lets go (PceScanSlot.holders).  A process is named by its PID and
 * its start time together: an unmark, or the sweep, removes a kernel entry
 * only if it is still that process's, never the mark of a newer process
 * that got the same PID.  Every change of the map is made under the slot
 * lock, so nothing slips in between such a check and the removal.
 *
 * A backend undoes its own mark at statement end (classify.c), on abort
 * (classify.c's transaction callback) and at exit (before_shmem_exit,
 * which also runs on FATAL).  Marks of processes that died without running
 * any of that (SIGKILL, a crash) are removed by the background worker,
 * which compares each entry's process start time with the live process.
 *
 * Marks of processes outside the server (reason external) are made by
 * pg_cache_ext_run and handed down by the tracker; they have no slot and
 * are removed by the wrapper, or here once the wrapper is gone.
 *
 * When the server reads through I/O workers (PostgreSQL 18+), a mark also
 * gives its ProcNumber to the BPF side, which attributes an I/O worker's
 * reads to the owner of the I/O (aio.c).
 *
 * Every mark carries the real start time of its process.  Members of the
 * pins' group can write the map too; an entry without a start time (0), or
 * with one that is not its process's, is removed by the same sweep, so
 * that nobody can fill the map for good with entries no process matches.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>


#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pg_cache_ext_int.h"
#include "pce_proc_stat.h"

static bool self_marked = false;
static bool exit_callback_registered = false;

/* Our own start time never changes: read /proc once per process. */
static uint64
self_start_ticks(void)
{
	static int	cached_pid = 0;
	static uint64 cached_ticks = 0;

	if (cached_pid != MyProcPid)
	{
		cached_ticks = pce_proc_start_ticks(MyProcPid);
		cached_pid = MyProcPid;
	}
	return cached_ticks;
}

static void
fill_mark(struct pce_scan_mark *mark, int pid, enum pce_reason reason, Oid relid, Oid dboid)
{
	memset(mark, 0, sizeof(*mark));
	mark->proc_start_ticks = pid == MyProcPid ? self_start_ticks() : pce_proc_start_ticks(pid);
	mark->marked_at_us = (__u64) GetCurrentTimestamp();
	mark->reason = reason;
	mark->relid = relid;
	mark->dboid = dboid;
}

/* Kernel map update with the failure accounted for; true if it is in. */
static bool
put_in_kernel_map(int pid, const struct pce_scan_mark *mark)
{
	int			err;

	/* without its start time a mark would only be swept: count it instead */
	if (mark->proc_start_ticks == 0)
	{
		pce_count(PCE_USTAT_MAP_ERRORS, 1);
		return false;
	}
	err = pce_map_update_mark((__u32) pid, mark);

	if (err == 0)
		return true;
	if (err == E2BIG)
		pce_count(PCE_USTAT_MAP_FULL, 1);
	else if (err != ENODEV)
		pce_count(PCE_USTAT_MAP_ERRORS, 1);
	return false;
}

/* The shared-memory slot of procno, or NULL (no shared memory, bad procno). */
static PceScanSlot *
slot_of(int procno)
{
	if (!pce_shared || procno < 0 || procno >= pce_shared->nslots)
		return NULL;
	return &pce_shared->slots[procno];
}

static void
fill_slot(PceScanSlot *slot, int pid, const struct pce_scan_mark *mark, Oid userid,
		  int holder, bool in_kernel)
{
	slot->pid = pid;
	slot->start_ticks = mark->proc_start_ticks;
	slot->holders = holder;
	slot->reason = mark->reason;
	slot->relid = mark->relid;
	slot->dboid = mark->dboid;
	slot->userid = userid;
	slot->since = GetCurrentTimestamp();
	slot->in_kernel = in_kernel;
}

/*
 * Remove pid's kernel entry if it is still the mark of the process that
 * started at start_ticks: after a PID is reused, the entry belongs to the
 * new process, which must keep it.  Called with the slot lock held (where
 * there is shared memory), as every change of the map by this module is,
 * so no mark slips in between the look and the removal.
 */
static bool
remove_if_same(int pid, uint64 start_ticks)
{
	struct pce_scan_mark mark;

	if (!pce_map_read_mark((__u32) pid, &mark) || mark.proc_start_ticks != start_ticks)
		return false;
	return pce_map_delete_mark((__u32) pid) == 0;
}

/*
 * Mark pid for holder: kernel map, shared-memory slot, counters.  A process
 * already marked (same PID, same start time) only gains a holder, and keeps
 * its first reason unless the worker's comes in.  userid is the role cache_ext_scans() shows the row's
 * details to.  True if the mark is in the kernel map.
 */
static bool
mark_process(int pid, int procno, const struct pce_scan_mark *mark, Oid userid, int holder)
{
	PceScanSlot *slot = slot_of(procno);
	bool		in_kernel;

	if (slot == NULL)
		return put_in_kernel_map(pid, mark);

	LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	if (slot->pid == pid && slot->start_ticks == mark->proc_start_ticks)
	{
		slot->holders |= holder;
		/* the worker says what the whole process does: its reason wins */
		if (holder == PCE_HOLDER_WORKER && slot->reason != mark->reason)
		{
			slot->in_kernel = put_in_kernel_map(pid, mark);
			slot->reason = mark->reason;
			slot->relid = mark->relid;
		}
		in_kernel = slot->in_kernel;
		LWLockRelease(pce_shared->lock);
		return in_kernel;
	}
	/* a free slot, or one a former process at this procno left behind */
	in_kernel = put_in_kernel_map(pid, mark);
	/* the mark first: the BPF side checks the owner entry against it */
	if (in_kernel)
		pce_aio_mark_owner(procno, pid, mark->proc_start_ticks);
	fill_slot(slot, pid, mark, userid, holder, in_kernel);
	LWLockRelease(pce_shared->lock);

	pce_count(PCE_USTAT_MARKS, 1);
	pg_atomic_fetch_add_u64(&pce_shared->marks_by_reason[mark->reason], 1);
	return in_kernel;
}

/*
 * holders let go of the mark of the process (pid, start_ticks); the mark
 * ends when none is left.  A slot or a kernel entry that belongs to another
 * process by now (the PID or the procno reused) is left alone.
 */
static void
unmark_process(int pid, int procno, uint64 start_ticks, int holders)
{
	PceScanSlot *slot = slot_of(procno);

	if (slot == NULL)
	{
		if (remove_if_same(pid, start_ticks))
			pce_count(PCE_USTAT_UNMARKS, 1);
		return;
	}

	LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	if (slot->pid == pid && slot->start_ticks == start_ticks)
	{
		slot->holders &= ~holders;
		if (slot->holders != 0)
		{
			LWLockRelease(pce_shared->lock);
			return;
		}
		slot->pid = 0;
		pce_count(PCE_USTAT_UNMARKS, 1);
	}
	pce_aio_unmark_owner(procno, pid);
	(void) remove_if_same(pid, start_ticks);
	LWLockRelease(pce_shared->lock);
}

/* At exit every holder lets go: nothing can stand behind this PID any more. */
static void
unmark_at_exit(int code, Datum arg)
{
	self_marked = false;
	unmark_process(MyProcPid, MyProc ? PCE_PROCNO(MyProc) : -1, self_start_ticks(),
				   PCE_HOLDERS_ALL);
}

/*
 * Mark this process for its own statements.  Idempotent: the first reason
 * wins until unmarked.
 */
bool
pce_mark_self(enum pce_reason reason, Oid relid)
{
	struct pce_scan_mark mark;

	if (self_marked)
		return true;
	if (pce_mode == PCE_MODE_OFF || MyProc == NULL)
		return false;

	if (!exit_callback_registered)
	{
		before_shmem_exit(unmark_at_exit, (Datum) 0);
		exit_callback_registered = true;
	}

	fill_mark(&mark, MyProcPid, reason, relid, MyDatabaseId);
	self_marked = true;
	return mark_process(MyProcPid, PCE_PROCNO(MyProc), &mark, GetSessionUserId(),
						PCE_HOLDER_SELF);
}

void
pce_unmark_self(void)
{
	if (!self_marked)
		return;
	self_marked = false;
	unmark_process(MyProcPid, MyProc ? PCE_PROCNO(MyProc) : -1, self_start_ticks(),
				   PCE_HOLDER_SELF);
}

/*
 * Mark another process (the worker does this for autovacuum workers and
 * WAL senders, which have no hook of ours to run).  userid: its
 * PgBackendStatus.st_userid.  Returns the process's start time, which
 * pce_unmark_other() needs, or 0 if it is already gone.
 */
uint64
pce_mark_other(int pid, int procno, enum pce_reason reason, Oid relid, Oid dboid, Oid userid)
{
	struct pce_scan_mark mark;

	fill_mark(&mark, pid, reason, relid, dboid);
	if (mark.proc_start_ticks == 0)
		return 0;				/* already gone */
	(void) mark_process(pid, procno, &mark, userid, PCE_HOLDER_WORKER);
	return mark.proc_start_ticks;
}

/* The worker lets go of its mark of the process (pid, start_ticks). */
void
pce_unmark_other(int pid, int procno, uint64 start_ticks)
{
	unmark_process(pid, procno, start_ticks, PCE_HOLDER_WORKER);
}

/*
 * Is the process (pid, procno) marked, and why?  Parallel workers ask this
 * of their leader.
 */
bool
pce_process_mark(int pid, int procno, enum pce_reason *reason, Oid *relid)
{
	PceScanSlot *slot = slot_of(procno);
	bool		marked = false;

	if (slot == NULL)
		return false;
	LWLockAcquire(pce_shared->lock, LW_SHARED);
	if (slot->pid == pid && slot->holders != 0)
	{
		marked = true;
		*reason = (enum pce_reason) slot->reason;
		*relid = slot->relid;
	}
	LWLockRelease(pce_shared->lock);
	return marked;
}

/* Does one of the shared-memory slots stand behind this mark?  (slots: a copy) */
static bool
mark_in_slots(const PceScanSlot *slots, int nslots, int pid, uint64 start_ticks)
{
	for (int i = 0; i < nslots; i++)
		if (slots[i].pid == pid && slots[i].start_ticks == start_ticks)
			return true;
	return false;
}

/* A kernel entry the sweep removes, if it is still the one it saw. */
typedef struct StaleMark
{
	__u32		pid;
	uint64		start_ticks;
} StaleMark;

/* What the sweep collects from the map (see pce_remove_stale_marks). */
typedef struct StaleMarks
{
	StaleMark  *stale;			/* PCE_MAX_SCAN_PIDS at most */
	int			nstale;
	PceScanSlot *slots;			/* a copy of the slots, or NULL */
	int			nslots;
	TimestampTz grace_start;	/* marks made after this are left alone */
} StaleMarks;

/*
 * An external mark (pg_cache_ext_run's tree) has no slot: it lives as long
 * as the tree's root, the wrapper, which removes the tree's marks when it
 * ends.  A root that is gone (killed by SIGKILL), or dead and not yet
 * reaped, leaves them to us.
 */
static bool
external_root_gone(const struct pce_scan_mark *mark)
{
	return mark->root_pid == 0 || mark->root_start_ticks == 0 ||
		pce_proc_stat_start_ticks((int) mark->root_pid, 1) != mark->root_start_ticks;
}

static bool
collect_stale_mark(__u32 pid, const struct pce_scan_mark *mark, void *arg)
{
	StaleMarks *ctx = (StaleMarks *) arg;
	bool		external = mark->reason == PCE_REASON_EXTERNAL;

	if (mark->proc_start_ticks == 0 ||
		pce_proc_start_ticks((int) pid) != mark->proc_start_ticks ||
		(external && external_root_gone(mark)) ||
		(ctx->slots && mark->reason != PCE_REASON_TEST && !external &&
		 (TimestampTz) mark->marked_at_us < ctx->grace_start &&
		 !mark_in_slots(ctx->slots, ctx->nslots, (int) pid, mark->proc_start_ticks)))
	{
		ctx->stale[ctx->nstale].pid = pid;
		ctx->stale[ctx->nstale].start_ticks = mark->proc_start_ticks;
		ctx->nstale++;
	}
	return ctx->nstale < PCE_MAX_SCAN_PIDS;
}

/*
 * Remove the entries collected, each only if it is still the mark the sweep
 * saw (a process that took a stale entry's PID meanwhile keeps its own);
 * with the slot lock where there is one, as every change of the map is.
 */
static int
remove_collected(const StaleMarks *ctx, bool take_lock)
{
	int			removed = 0;

	if (take_lock)
		LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ctx->nstale; i++)
	{
		if (remove_if_same((int) ctx->stale[i].pid, ctx->stale[i].start_ticks))
			removed++;
	}
	if (take_lock)
		LWLockRelease(pce_shared->lock);
	return removed;
}

/*
 * Remove kernel marks that nobody will remove:
 *	- the mark has no start time (0): no mark of ours lacks one;
 *	- the process is gone, or its PID now belongs to another process;
 *	- an external mark whose tree's root (pg_cache_ext_run) is gone;
 *	- with sweep_slots (in the worker): the process lives but no slot says
 *	  it is marked, for more than a second.  That is a mark whose unmark
 *	  could not reach the map (the pins were unusable for a moment); the
 *	  second of grace covers a mark being made (kernel map first, slot
 *	  next).
 * With sweep_slots, also free the slots of processes that are gone (the
 * postmaster, which cannot take LWLocks, passes false).  Returns how many
 * kernel entries were removed.
 */
int
pce_remove_stale_marks(bool sweep_slots)
{
	static StaleMark stale[PCE_MAX_SCAN_PIDS];	/* the whole map in one pass */
	StaleMarks	ctx = {stale, 0, NULL, 0, GetCurrentTimestamp() - USECS_PER_SEC};
	int			removed = 0;

	if (!pce_maps_open(false))
		goto sweep;

	if (sweep_slots && pce_shared)
	{
		ctx.nslots = pce_shared->nslots;
		ctx.slots = palloc(sizeof(PceScanSlot) * ctx.nslots);
		LWLockAcquire(pce_shared->lock, LW_SHARED);
		memcpy(ctx.slots, pce_shared->slots, sizeof(PceScanSlot) * ctx.nslots);
		LWLockRelease(pce_shared->lock);
	}

	(void) pce_map_walk_marks(collect_stale_mark, &ctx);
	removed = remove_collected(&ctx, sweep_slots && pce_shared);
	removed += pce_aio_remove_stale_owners();
	if (removed > 0)
		pce_count(PCE_USTAT_STALE_MARKS_REMOVED, removed);
	if (ctx.slots)
		pfree(ctx.slots);

sweep:
	if (pce_shared && sweep_slots)
	{
		LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < pce_shared->nslots; i++)
		{
			PceScanSlot *slot = &pce_shared->slots[i];

			if (slot->pid != 0 && pce_proc_start_ticks(slot->pid) != slot->start_ticks)
				slot->pid = 0;
		}
		LWLockRelease(pce_shared->lock);
	}
	return removed;
}
