/*-------------------------------------------------------------------------
 *
 * lap_start.c
 *		A marked synchronized scan that starts while a VACUUM or a marked
 *		COPY TO of its table reads it starts where that reader is.
 *
 * Readers of one table share what one of them reads only while they read
 * near each other: the evictor keeps the pages a sibling has yet to read
 * within the scan budget (sibling.c), no further.  Each reader that reads
 * elsewhere is a front of its own, and the disk serves the fronts in turn.
 * A synchronized scan (SeqScan, COPY TO) starts where the latest one of
 * its table reported itself (ss_get_location); a VACUUM always starts at
 * the table's first block, and so does pg_dump's COPY (pg_dump turns
 * synchronized scans off).  Such a reader seldom meets the scans then: in
 * bench/siblings.sh with 8 MB read-ahead a VACUUM read 521-524 MB of the
 * 1 GB table from disk by itself, and with a 3 GB table a pg_dump took
 * 2.5 times as long as without the extension, reading alone while the
 * count(*)s read hundreds of MB ahead of it.
 *
 * So a marked scan about to start reports the block such a reader of its
 * table is at as the table's synchronized-scan location, and starts
 * there: at most a worker round behind it, reading what it just read from
 * the cache, then ahead of it with it.  A VACUUM or pg_dump's COPY cannot
 * move; the scans can.  A VACUUM comes first: it is the slower.
 *
 * The worker copies into shared memory, each housekeeping round, the
 * blocks the VACUUMs scanning a heap are at, from their progress
 * (heap_blks_scanned; pce_publish_vacuum_blocks), and the blocks the
 * marked COPY TO statements last read, from the tracker's positions
 * (sibling.c; pce_publish_copy_blocks, stock mechanism only).  A backend
 * reads that copy, not the backends' status, whose snapshot a transaction
 * keeps, and uses a block only while its reader still runs
 * (still_vacuuming, still_copying).
 *
 * Only scans that would be synchronized anyway move (heapam's rule:
 * synchronize_seqscans on, a table larger than a quarter of
 * shared_buffers), and only with pg_cache_ext.scans_join_vacuum or
 * pg_cache_ext.scans_join_copy on.  Their rows come in no fixed order, as
 * PostgreSQL documents for synchronized scans.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/syncscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/nodeFuncs.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pg_cache_ext_int.h"

/* syncscan.c takes a location only at multiples of its report interval */
#define SYNC_SCAN_BLOCKS		(128 * 1024 / BLCKSZ)
/* reports of a scan's start before giving up (syncscan.c may drop one) */
#define REPORT_TRIES			3
/* readers' blocks copied longer ago than this are ignored (lock_recent_copy) */
#define READER_BLOCKS_MAX_AGE_MS	2000

/*
 * Is the VACUUM the worker saw still vacuuming?  Its copy is up to a round
 * old: the VACUUM may have ended since (a scan right after a VACUUM then
 * started at the block the VACUUM had been at).  A lazy VACUUM's process
 * has PROC_IN_VACUUM while it vacuums a relation, cleared when that ends
 * (an ANALYZE after it runs without).  Read without a lock: a moment's
 * staleness costs only a scan's starting place.
 */
static bool
still_vacuuming(const PceVacuumBlock *v)
{
	PGPROC	   *proc = GetPGProcByNumber(v->procno);

	return proc->pid == v->pid && (proc->statusFlags & PROC_IN_VACUUM) != 0;
}

/*
 * Take the lock on the worker's copies (shared) if the copy written at
 * *written_at is recent; a copy older than READER_BLOCKS_MAX_AGE_MS is the
 * worker's before it stopped.  Returns whether the lock is held.
 */
static bool
lock_recent_copy(const TimestampTz *written_at)
{
	LWLockAcquire(pce_shared->lock, LW_SHARED);
	if (!TimestampDifferenceExceeds(*written_at, GetCurrentTimestamp(),
									READER_BLOCKS_MAX_AGE_MS))
		return true;
	LWLockRelease(pce_shared->lock);
	return false;
}

/* The block a VACUUM of this backend's database's relid is at, if any. */
static bool
vacuum_block_of(Oid relid, BlockNumber *block)
{
	bool		found = false;

	/* unlocked first: most statements run while no VACUUM does */
	if (!pce_shared || pce_shared->nvacuums == 0 ||
		!lock_recent_copy(&pce_shared->vacuums_at))
		return false;
	for (int i = 0; i < pce_shared->nvacuums && !found; i++)
	{
		const PceVacuumBlock *v = &pce_shared->vacuums[i];

		if (v->relid == relid && v->dboid == MyDatabaseId && still_vacuuming(v))
		{
			*block = v->block;
			found = true;
		}
	}
	LWLockRelease(pce_shared->lock);
	return found;
}

/*
 * Is the process the worker saw still marked for a COPY of that table?  As
 * for a VACUUM, the copy is up to a round old (and the positions it came
 * from are a statement's own: sibling.c); read without a lock.
 */
static bool
still_copying(const PceCopyBlock *c)
{
	const PceScanSlot *slot;

	if (c->procno < 0 || c->procno >= pce_shared->nslots)
		return false;
	slot = &pce_shared->slots[c->procno];
	return slot->pid == c->pid && slot->holders != 0 &&
		slot->reason == PCE_REASON_COPY_TO && slot->relid == c->relid;
}

/*
 * The block another process's marked COPY TO of relid in this database
 * reads, if any: of rel's own file when rel is given (not its TOAST
 * table's).
 */
static bool
copy_block_of(Oid relid, Relation rel, BlockNumber *block)
{
	bool		found = false;

	/* unlocked first, as for a VACUUM */
	if (!pce_shared || pce_shared->ncopies == 0 ||
		!lock_recent_copy(&pce_shared->copies_at))
		return false;
	for (int i = 0; i < pce_shared->ncopies && !found; i++)
	{
		const PceCopyBlock *c = &pce_shared->copies[i];

		if (c->relid == relid && c->dboid == MyDatabaseId && c->pid != MyProcPid &&
			(rel == NULL || (c->spcoid == PCE_REL_TABLESPACE(rel) &&
							 c->relfilenode == PCE_REL_NUMBER(rel))) &&
			still_copying(c))
		{
			*block = c->block;
			found = true;
		}
	}
	LWLockRelease(pce_shared->lock);
	return found;
}

/*
 * heapam's rule for a synchronized scan (initscan), less the scan's flags
 * and what the caller checked first: synchronize_seqscans, and storage (it
 * needs it for nblocks)
 */
static bool
scan_would_synchronize(Relation rel, BlockNumber nblocks)
{
	return !RelationUsesLocalBuffers(rel) &&
		nblocks > (BlockNumber) (NBuffers / 4);
}

/*
 * The reader of relid that a synchronized scan of it starts beside, if any:
 * its block, and whether it is a VACUUM.  rel, when open, names the
 * table's own file (a COPY also reads its TOAST table); NULL asks only
 * whether there is one.
 */
static bool
reader_to_join(Oid relid, Relation rel, BlockNumber *block, bool *is_vacuum)
{
	*is_vacuum = pce_scans_join_vacuum && vacuum_block_of(relid, block);
	return *is_vacuum || (pce_scans_join_copy && copy_block_of(relid, rel, block));
}

/*
 * A synchronized scan of rel about to start: start it where its VACUUM or
 * its marked COPY is.  syncscan.c drops a report when its lock is busy, so
 * the location is read back (as the scan will read it) and reported again
 * if it did not take.
 */
static void
start_beside_reader(Relation rel)
{
	BlockNumber block;
	BlockNumber nblocks;
	bool		is_vacuum;

	if (rel == NULL || !synchronize_seqscans ||
		!RELKIND_HAS_STORAGE(rel->rd_rel->relkind) ||
		!reader_to_join(RelationGetRelid(rel), rel, &block, &is_vacuum))
		return;
	nblocks = RelationGetNumberOfBlocks(rel);
	/* a VACUUM past the heap's end (rel_pages) is done with the heap */
	if (!scan_would_synchronize(rel, nblocks) || block >= nblocks)
		return;
	block -= block % SYNC_SCAN_BLOCKS;
	for (int tries = 0; tries < REPORT_TRIES; tries++)
	{
		ss_report_location(rel, block);
		if (ss_get_location(rel, nblocks) == block)
		{
			if (is_vacuum)
				pce_count(PCE_USTAT_SCANS_JOINED_VACUUM, 1);
			return;
		}
	}
}

static bool
lap_start_walker(PlanState *ps, void *context)
{
	if (ps == NULL)
		return false;
	if (IsA(ps, SeqScanState))
		start_beside_reader(((ScanState *) ps)->ss_currentRelation);
	return planstate_tree_walker(ps, lap_start_walker, context);
}

/*
 * A marked plan, after ExecutorStart: its sequential scans begin at their
 * first fetch, so a location reported now is where they start.
 */
void
pce_lap_start_plan(PlanState *planstate)
{
	if ((pce_scans_join_vacuum || pce_scans_join_copy) && planstate)
		(void) lap_start_walker(planstate, NULL);
}

/*
 * A marked COPY relid TO, before it runs.  The relation is opened only if a
 * VACUUM or another marked COPY of it is running, for a user who may read
 * it (COPY checks again), and only if its lock is free: this neither waits
 * nor fails the COPY (a relation dropped meanwhile is COPY's to report).
 * The lock is COPY's own, taken a moment early.
 */
void
pce_lap_start_copy(Oid relid)
{
	BlockNumber block;
	bool		is_missing = false;
	bool		is_vacuum;
	Relation	rel;

	if (!synchronize_seqscans || !OidIsValid(relid) ||
		!reader_to_join(relid, NULL, &block, &is_vacuum) ||
		pg_class_aclcheck_ext(relid, GetUserId(), ACL_SELECT, &is_missing) != ACLCHECK_OK ||
		!ConditionalLockRelationOid(relid, AccessShareLock))
		return;
	rel = try_table_open(relid, NoLock);
	if (rel == NULL)
		return;
	start_beside_reader(rel);
	table_close(rel, NoLock);
}

/*
 * Worker: copy the blocks the VACUUMs scanning a heap are at from the
 * backends' status snapshot the caller fetched.
 */
void
pce_publish_vacuum_blocks(int nbackends)
{
	PceVacuumBlock found[PCE_MAX_VACUUMS];
	int			nfound = 0;

	for (int i = 1; i <= nbackends && nfound < PCE_MAX_VACUUMS; i++)
	{
		LocalPgBackendStatus *local = pce_local_beentry(i);
		PgBackendStatus *be = local ? &local->backendStatus : NULL;
		PGPROC	   *proc;

		if (be == NULL || be->st_progress_command != PROGRESS_COMMAND_VACUUM ||
			be->st_progress_param[PROGRESS_VACUUM_PHASE] != PROGRESS_VACUUM_PHASE_SCAN_HEAP)
			continue;
		proc = BackendPidGetProc(be->st_procpid);
		if (proc == NULL)
			continue;			/* gone already */
		found[nfound].pid = be->st_procpid;
		found[nfound].procno = PCE_PROCNO(proc);
		found[nfound].dboid = be->st_databaseid;
		found[nfound].relid = be->st_progress_command_target;
		found[nfound].block = (BlockNumber) be->st_progress_param[PROGRESS_VACUUM_HEAP_BLKS_SCANNED];
		nfound++;
	}
	LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	memcpy(pce_shared->vacuums, found, nfound * sizeof(PceVacuumBlock));
	pce_shared->nvacuums = nfound;
	pce_shared->vacuums_at = GetCurrentTimestamp();
	LWLockRelease(pce_shared->lock);
}

/*
 * Worker: copy the blocks the marked COPY TO statements read, as the
 * evictor's latest positions have them (none under the cache_ext policy,
 * which keeps no positions).
 */
void
pce_publish_copy_blocks(void)
{
	PceCopyBlock found[PCE_MAX_COPIES];
	int			nplaces = pce_sibling_copy_places(found, PCE_MAX_COPIES);
	int			nfound = 0;

	for (int i = 0; i < nplaces; i++)
	{
		PGPROC	   *proc = BackendPidGetProc(found[i].pid);

		if (proc == NULL)
			continue;			/* gone already */
		found[nfound] = found[i];
		found[nfound++].procno = PCE_PROCNO(proc);
	}
	LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	memcpy(pce_shared->copies, found, nfound * sizeof(PceCopyBlock));
	pce_shared->ncopies = nfound;
	pce_shared->copies_at = GetCurrentTimestamp();
	LWLockRelease(pce_shared->lock);
}
