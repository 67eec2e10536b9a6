/*-------------------------------------------------------------------------
 *
 * lap_start.c
 *		A marked synchronized scan that starts while a VACUUM of its table
 *		scans the heap starts where the VACUUM is.
 *
 * Readers of one table share what one of them reads only while they read
 * near each other: the evictor keeps the pages a sibling has yet to read
 * within the scan budget (sibling.c), no further.  Each reader that reads
 * elsewhere is a front of its own, and the disk serves the fronts in turn.
 * A synchronized scan (SeqScan, COPY TO) starts where the latest one of
 * its table reported itself (ss_get_location); a VACUUM always starts at
 * the table's first block, and so does pg_dump's COPY (pg_dump turns
 * synchronized scans off).  A VACUUM seldom meets the scans then, and it is
 * slower than they are: in bench/siblings.sh with 8 MB read-ahead it read
 * 521-524 MB of the 1 GB table from disk by itself.
 *
 * So a marked scan about to start reports the block the VACUUM of its
 * table is at as the table's synchronized-scan location, and starts
 * there: at most a worker round behind the VACUUM, reading what it just
 * read from the cache, then ahead of it with it.  A VACUUM cannot move;
 * the scans can.  The VACUUMs' blocks come from their progress
 * (heap_blks_scanned while scanning the heap), which the worker copies
 * into shared memory each housekeeping round (pce_publish_vacuum_blocks):
 * a backend reads that copy, not the backends' status, whose snapshot a
 * transaction keeps, and uses a block only while its VACUUM still runs
 * (still_vacuuming).
 *
 * Only scans that would be synchronized anyway move (heapam's rule:
 * synchronize_seqscans on, a table larger than a quarter of
 * shared_buffers), and only with pg_cache_ext.scans_join_vacuum on.  Their
 * rows come in no fixed order, as PostgreSQL documents for synchronized
 * scans.
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
/* a copy older than this is the worker's before it stopped: ignored */
#define VACUUM_BLOCKS_MAX_AGE_MS	2000

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

/* The block a VACUUM of this backend's database's relid is at, if any. */
static bool
vacuum_block_of(Oid relid, BlockNumber *block)
{
	bool		found = false;

	/* unlocked first: most statements run while no VACUUM does */
	if (!pce_shared || pce_shared->nvacuums == 0)
		return false;
	LWLockAcquire(pce_shared->lock, LW_SHARED);
	if (TimestampDifferenceExceeds(pce_shared->vacuums_at, GetCurrentTimestamp(),
								   VACUUM_BLOCKS_MAX_AGE_MS))
	{
		LWLockRelease(pce_shared->lock);
		return false;
	}
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
 * A synchronized scan of rel about to start: start it where its VACUUM is.
 * syncscan.c drops a report when its lock is busy, so the location is read
 * back (as the scan will read it) and reported again if it did not take.
 */
static void
start_at_vacuum(Relation rel)
{
	BlockNumber block;
	BlockNumber nblocks;

	if (rel == NULL || !synchronize_seqscans ||
		!vacuum_block_of(RelationGetRelid(rel), &block) ||
		!RELKIND_HAS_STORAGE(rel->rd_rel->relkind))
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
		start_at_vacuum(((ScanState *) ps)->ss_currentRelation);
	return planstate_tree_walker(ps, lap_start_walker, context);
}

/*
 * A marked plan, after ExecutorStart: its sequential scans begin at their
 * first fetch, so a location reported now is where they start.
 */
void
pce_lap_start_plan(PlanState *planstate)
{
	if (pce_scans_join_vacuum && planstate)
		(void) lap_start_walker(planstate, NULL);
}

/*
 * A marked COPY relid TO, before it runs.  The relation is opened only if a
 * VACUUM of it is running, for a user who may read it (COPY checks again),
 * and only if its lock is free: this neither waits nor fails the COPY (a
 * relation dropped meanwhile is COPY's to report).  The lock is COPY's
 * own, taken a moment early.
 */
void
pce_lap_start_copy(Oid relid)
{
	BlockNumber block;
	bool		is_missing = false;
	Relation	rel;

	if (!pce_scans_join_vacuum || !synchronize_seqscans || !OidIsValid(relid) ||
		!vacuum_block_of(relid, &block) ||
		pg_class_aclcheck_ext(relid, GetUserId(), ACL_SELECT, &is_missing) != ACLCHECK_OK ||
		!ConditionalLockRelationOid(relid, AccessShareLock))
		return;
	rel = try_table_open(relid, NoLock);
	if (rel == NULL)
		return;
	start_at_vacuum(rel);
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
