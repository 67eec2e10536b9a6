/*-------------------------------------------------------------------------
 *
 * classify.c
 *		Deciding which statements are scans: executor and utility hooks.
 *
 * A statement marks its backend when
 *	- its plan reads, by SeqScan, BitmapHeapScan or TidRangeScan, relations
 *	  whose blocks add up to more than pg_cache_ext.scan_threshold (checked
 *	  at ExecutorStart);
 *	- it is a utility command listed in pg_cache_ext.scan_commands (VACUUM,
 *	  ANALYZE, CREATE INDEX, REINDEX, CLUSTER, REFRESH MATERIALIZED VIEW,
 *	  COPY ... TO);
 *	- the session says so: SET pg_cache_ext.scan = on (and never with off).
 *
 * Parallel workers scan for their leader, and most of them run no
 * ExecutorStart (CREATE INDEX, VACUUM (PARALLEL n)): every parallel worker
 * takes its lock group leader's mark when it starts (follow_leader_mark).
 * Background processes that run no hook of ours (autovacuum workers, WAL
 * senders sending a base backup) are classified here too, by
 * pce_background_reason(); the background worker applies it.
 *
 * Statements nest (functions, cursors, COPY (query) TO, recursion to any
 * depth): the backend stays marked while any marking statement lives.  Each
 * one opens a frame, counted in live_frames, and its frame ends exactly
 * once, with the statement itself:
 *	- an executor frame when the statement's executor state is freed (a
 *	  reset callback on its es_query_cxt): at ExecutorEnd, and also when a
 *	  cursor that failed is closed, a subtransaction abort frees what ran
 *	  in it, or a transaction ends, none of which runs ExecutorEnd;
 *	- a utility frame when its ProcessUtility call returns or throws.
 * A transaction abort ends every frame at once, by starting a new epoch:
 * frames of the aborted transaction whose memory is freed later are then
 * ignored.  The mark is dropped at backend exit in any case (registry.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "storage/proc.h"
#include "storage/bufmgr.h"
#include "tcop/utility.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/rel.h"

#include "compat.h"
#include "pg_cache_ext_int.h"
#include "scan_commands.h"

const char *const pce_reason_names[PCE_REASON__COUNT] = PCE_REASON_NAMES;

static int	live_frames = 0;	/* marking statements alive */
static uint64 frame_epoch = 1;	/* a frame of an older epoch was ended by an abort */

static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* Open a frame (marking on the first); returns what end_frame() needs. */
static uint64
open_frame(enum pce_reason reason, Oid relid)
{
	if (live_frames == 0)
		pce_mark_self(reason, relid);
	live_frames++;
	return frame_epoch;
}

static void
end_frame(uint64 epoch)
{
	if (epoch != frame_epoch || live_frames == 0)
		return;
	if (--live_frames == 0)
		pce_unmark_self();
}

static void
end_all_frames(void)
{
	frame_epoch++;
	live_frames = 0;
	pce_unmark_self();
}

/* A marking statement's frame, in its executor state's memory. */
typedef struct ExecutorFrame
{
	MemoryContextCallback callback;
	uint64		epoch;
} ExecutorFrame;

static void
end_executor_frame(void *arg)
{
	end_frame(((ExecutorFrame *) arg)->epoch);
}

/* The frame lives exactly as long as the statement's executor state. */
static void
open_executor_frame(QueryDesc *queryDesc, enum pce_reason reason, Oid relid)
{
	MemoryContext cxt;
	ExecutorFrame *frame;

	if (queryDesc->estate == NULL)
		return;
	cxt = queryDesc->estate->es_query_cxt;
	frame = MemoryContextAllocExtended(cxt, sizeof(ExecutorFrame), MCXT_ALLOC_NO_OOM);
	if (frame == NULL)
		return;					/* not marked rather than an error */
	frame->epoch = open_frame(reason, relid);
	frame->callback.func = end_executor_frame;
	frame->callback.arg = frame;
	MemoryContextRegisterResetCallback(cxt, &frame->callback);
}

/* ---- plan-based rule ---- */

typedef struct ScanSize
{
	BlockNumber total_blocks;
	BlockNumber largest_blocks;
	Oid			largest_relid;
} ScanSize;

static bool
scan_size_walker(PlanState *ps, ScanSize *size)
{
	if (ps == NULL)
		return false;
	switch (nodeTag(ps))
	{
		case T_SeqScanState:
		case T_BitmapHeapScanState:
		case T_TidRangeScanState:
			{
				Relation	rel = ((ScanState *) ps)->ss_currentRelation;

				if (rel && RELKIND_HAS_STORAGE(rel->rd_rel->relkind))
				{
					BlockNumber nblocks = RelationGetNumberOfBlocks(rel);

					size->total_blocks += nblocks;
					if (nblocks >= size->largest_blocks)
					{
						size->largest_blocks = nblocks;
						size->largest_relid = RelationGetRelid(rel);
					}
				}
				break;
			}
		default:
			break;
	}
	return planstate_tree_walker(ps, scan_size_walker, size);
}

/* Mark the backend if this plan is a scan; called after ExecutorStart. */
static void
classify_plan(QueryDesc *queryDesc, int eflags)
{
	ScanSize	size = {0, 0, InvalidOid};

	if (pce_mode == PCE_MODE_OFF || pce_session_scan == PCE_SCAN_OFF ||
		(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		return;

	if (pce_session_scan == PCE_SCAN_ON)
	{
		open_executor_frame(queryDesc, PCE_REASON_SESSION, InvalidOid);
		return;
	}
	if (pce_scan_threshold < 0 || queryDesc->planstate == NULL)
		return;

	scan_size_walker(queryDesc->planstate, &size);
	/* 0 marks every scan; otherwise the scans must exceed the threshold */
	if (size.largest_relid != InvalidOid &&
		(pce_scan_threshold == 0 ||
		 size.total_blocks > (BlockNumber) pce_scan_threshold))
		open_executor_frame(queryDesc, PCE_REASON_SEQSCAN, size.largest_relid);
}

/*
 * ExecutorStart returns void on every supported version (18's development
 * cycle made it return bool for a while; 18 as released returns void).
 */
static void
pce_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	classify_plan(queryDesc, eflags);
	/* a parallel worker's scan is its leader's, started by the leader */
	if (live_frames > 0 && !(eflags & EXEC_FLAG_EXPLAIN_ONLY) && !IsParallelWorker())
		pce_lap_start_plan(queryDesc->planstate);
}

/* ---- utility commands ---- */

static Oid
rangevar_relid(RangeVar *rv)
{
	if (rv == NULL)
		return InvalidOid;
	return RangeVarGetRelid(rv, NoLock, true);
}

/*
 * Which scan command of PCE_REASON_TABLE is this utility statement, and on
 * which relation?  PCE_REASON_NONE if none (COPY FROM among them); *known
 * tells whether it is a statement of a kind that can scan (COPY FROM
 * included), which pg_cache_ext.scan = on marks whatever scan_commands
 * says.
 */
static enum pce_reason
utility_command(Node *parsetree, Oid *relid, bool *known)
{
	*relid = InvalidOid;
	*known = true;
	switch (nodeTag(parsetree))
	{
		case T_VacuumStmt:
			{
				VacuumStmt *stmt = (VacuumStmt *) parsetree;

				if (stmt->rels != NIL)
					*relid = rangevar_relid(((VacuumRelation *) linitial(stmt->rels))->relation);
				return stmt->is_vacuumcmd ? PCE_REASON_VACUUM : PCE_REASON_ANALYZE;
			}
		case T_IndexStmt:
			*relid = rangevar_relid(((IndexStmt *) parsetree)->relation);
			return PCE_REASON_CREATE_INDEX;
		case T_ReindexStmt:
			*relid = rangevar_relid(((ReindexStmt *) parsetree)->relation);
			return PCE_REASON_REINDEX;
		case T_ClusterStmt:
			*relid = rangevar_relid(((ClusterStmt *) parsetree)->relation);
			return PCE_REASON_CLUSTER;
		case T_RefreshMatViewStmt:
			*relid = rangevar_relid(((RefreshMatViewStmt *) parsetree)->relation);
			return PCE_REASON_REFRESH_MATVIEW;
		case T_CopyStmt:
			{
				CopyStmt   *stmt = (CopyStmt *) parsetree;

				if (stmt->is_from)
					return PCE_REASON_NONE;
				*relid = rangevar_relid(stmt->relation);
				return PCE_REASON_COPY_TO;
			}
		default:
			*known = false;
			return PCE_REASON_NONE;
	}
}

/* Which reason (if any) makes this utility statement a scan? */
static enum pce_reason
utility_reason(Node *parsetree, Oid *relid)
{
	bool		known;
	enum pce_reason command = utility_command(parsetree, relid, &known);

	if (command != PCE_REASON_NONE && (pce_scan_commands_mask & PCE_CMD_BIT(command)))
		return command;
	if (known && pce_session_scan == PCE_SCAN_ON)
		return PCE_REASON_SESSION;
	return PCE_REASON_NONE;
}

#define UTILITY_PARAMS PlannedStmt *pstmt, const char *queryString, bool readOnlyTree, \
	ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *queryEnv, \
	DestReceiver *dest, QueryCompletion *qc
#define UTILITY_ARGS pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc

static void
next_ProcessUtility(UTILITY_PARAMS)
{
	if (prev_ProcessUtility)
		prev_ProcessUtility(UTILITY_ARGS);
	else
		standard_ProcessUtility(UTILITY_ARGS);
}

static void
pce_ProcessUtility(UTILITY_PARAMS)
{
	enum pce_reason reason = PCE_REASON_NONE;
	Oid			relid = InvalidOid;
	uint64		epoch;

	if (pce_mode != PCE_MODE_OFF && pce_session_scan != PCE_SCAN_OFF)
	{
		reason = utility_reason(pstmt->utilityStmt, &relid);
	}

	if (reason == PCE_REASON_NONE)
	{
		next_ProcessUtility(UTILITY_ARGS);
		return;
	}

	epoch = open_frame(reason, relid);
	PG_TRY();
	{
		/* a COPY TO marked by scan_commands or by pg_cache_ext.scan = on */
		if (IsA(pstmt->utilityStmt, CopyStmt) && !((CopyStmt *) pstmt->utilityStmt)->is_from)
			pce_lap_start_copy(relid);
		next_ProcessUtility(UTILITY_ARGS);
	}
	PG_FINALLY();
	{
		end_frame(epoch);
	}
	PG_END_TRY();
}

/* ---- parallel workers ---- */

/*
 * A parallel worker scans for its leader, and only parallel query runs
 * ExecutorStart in it (CREATE INDEX and VACUUM (PARALLEL n) workers run
 * none): every parallel worker takes its lock group leader's mark, with its
 * reason, for the rest of its life (the frame is never ended; the mark
 * goes when the worker exits).  Each worker joins the lock group first
 * thing in ParallelWorkerMain and commits a transaction (InitPostgres's,
 * and the one restoring the leader's libraries) before it touches a
 * relation for its leader: the first pre-commit is where it looks.
 */
static void
follow_leader_mark(void)
{
	static bool looked = false;
	PGPROC	   *leader;
	enum pce_reason reason;
	Oid			relid;

	if (looked || !IsParallelWorker() || MyProc == NULL)
		return;
	looked = true;
	leader = MyProc->lockGroupLeader;
	if (leader == NULL || leader == MyProc || pce_mode == PCE_MODE_OFF)
		return;
	if (pce_process_mark(leader->pid, PCE_PROCNO(leader), &reason, &relid))
		(void) open_frame(reason, relid);
}

/* ---- transaction end ---- */

static void
pce_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			follow_leader_mark();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			end_all_frames();
			break;
		default:
			break;
	}
}

void
pce_classify_init(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = pce_ExecutorStart;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = pce_ProcessUtility;
	RegisterXactCallback(pce_xact_callback, NULL);
}

/*
 * Background processes run no hook of ours; the worker asks this rule, for
 * each one, which reason (if any) to mark it for: an autovacuum worker
 * while it vacuums or analyzes, a WAL sender while it sends a base backup.
 */
enum pce_reason
pce_background_reason(const PgBackendStatus *be)
{
	if (pce_mode == PCE_MODE_OFF)
		return PCE_REASON_NONE;
	if (be->st_backendType == B_AUTOVAC_WORKER && pce_mark_autovacuum &&
		(be->st_progress_command == PROGRESS_COMMAND_VACUUM ||
		 be->st_progress_command == PROGRESS_COMMAND_ANALYZE))
		return PCE_REASON_AUTOVACUUM;
	if (be->st_backendType == B_WAL_SENDER && pce_mark_basebackup &&
		be->st_progress_command == PROGRESS_COMMAND_BASEBACKUP)
		return PCE_REASON_BASEBACKUP;
	return PCE_REASON_NONE;
}
