/*-------------------------------------------------------------------------
 *
 * classify.c
 *		Deciding which statements are scans: executor and utility hooks.
 *
 * A statement marks its backend when
 *	- its plan reads, by SeqScan, BitmapHeapScan or TidRangeScan, relations
 *	  whose blocks add up to more than pg_cache_ext.scan_threshold (checked
 *	  at ExecutorStart, so parallel workers, which run their own
 *	  ExecutorStart, are marked too);
 *	- it is a utility command listed in pg_cache_ext.scan_commands (VACUUM,
 *	  ANALYZE, CREATE INDEX, REINDEX, CLUSTER, REFRESH MATERIALIZED VIEW,
 *	  COPY ... TO);
 *	- the session says so: SET pg_cache_ext.scan = on (and never with off).
 *
 * Background processes that run no hook of ours (autovacuum workers, WAL
 * senders sending a base backup) are classified here too, by
 * pce_background_reason(); the background worker applies it.
 *
 * Statements nest (functions, cursors, COPY (query) TO): the backend stays
 * marked until the outermost marking statement ends.  Each marking
 * statement pushes a frame; the mark is dropped when the last frame is
 * popped, at ExecutorEnd or when the utility command returns.  Frames left
 * behind by an error are popped by the (sub)transaction abort callbacks,
 * and the mark is dropped at backend exit in any case (registry.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "storage/bufmgr.h"
#include "tcop/utility.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/rel.h"

#include "pg_cache_ext_int.h"
#include "scan_commands.h"

const char *const pce_reason_names[PCE_REASON__COUNT] = PCE_REASON_NAMES;

/*
 * One marking statement.  key identifies it for its end (the QueryDesc for
 * executor frames, NULL for utility frames, which end in the same C frame);
 * nest_level lets a subtransaction abort pop only its own frames.
 */
typedef struct MarkFrame
{
	const void *key;
	int			nest_level;
} MarkFrame;

#define MAX_FRAMES 64

static MarkFrame frames[MAX_FRAMES];
static int	nframes = 0;
static int	overflow_frames = 0;	/* frames beyond MAX_FRAMES, counted only */

static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

static void
push_frame(const void *key, enum pce_reason reason, Oid relid)
{
	if (nframes == 0 && overflow_frames == 0)
		pce_mark_self(reason, relid);
	if (nframes < MAX_FRAMES)
	{
		frames[nframes].key = key;
		frames[nframes].nest_level = GetCurrentTransactionNestLevel();
		nframes++;
	}
	else
		overflow_frames++;
}

static void
pop_frame(const void *key)
{
	if (overflow_frames > 0)
		overflow_frames--;
	else
	{
		for (int i = nframes - 1; i >= 0; i--)
		{
			if (frames[i].key == key)
			{
				memmove(&frames[i], &frames[i + 1], sizeof(MarkFrame) * (nframes - i - 1));
				nframes--;
				break;
			}
		}
	}
	if (nframes == 0 && overflow_frames == 0)
		pce_unmark_self();
}

static bool
has_frame(const void *key)
{
	for (int i = nframes - 1; i >= 0; i--)
		if (frames[i].key == key)
			return true;
	return false;
}

static void
pop_all_frames(void)
{
	nframes = 0;
	overflow_frames = 0;
	pce_unmark_self();
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
		push_frame(queryDesc, PCE_REASON_SESSION, InvalidOid);
		return;
	}
	if (pce_scan_threshold < 0 || queryDesc->planstate == NULL)
		return;

	scan_size_walker(queryDesc->planstate, &size);
	/* 0 marks every scan; otherwise the scans must exceed the threshold */
	if (size.largest_relid != InvalidOid &&
		(pce_scan_threshold == 0 ||
		 size.total_blocks > (BlockNumber) pce_scan_threshold))
		push_frame(queryDesc, PCE_REASON_SEQSCAN, size.largest_relid);
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
}

static void
pce_ExecutorEnd(QueryDesc *queryDesc)
{
	if (nframes > 0 && has_frame(queryDesc))
		pop_frame(queryDesc);

	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
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
	static const char utility_key;	/* utility frames share one key */

	if (pce_mode != PCE_MODE_OFF && pce_session_scan != PCE_SCAN_OFF)
	{
		reason = utility_reason(pstmt->utilityStmt, &relid);
	}

	if (reason == PCE_REASON_NONE)
	{
		next_ProcessUtility(UTILITY_ARGS);
		return;
	}

	push_frame(&utility_key, reason, relid);
	PG_TRY();
	{
		next_ProcessUtility(UTILITY_ARGS);
	}
	PG_FINALLY();
	{
		/* VACUUM commits internally, so the abort callbacks may have run */
		if (has_frame(&utility_key))
			pop_frame(&utility_key);
	}
	PG_END_TRY();
}

/* ---- cleanup on (sub)transaction end ---- */

static void
pce_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			pop_all_frames();
			break;
		default:
			break;
	}
}

static void
pce_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	int			level;

	if (event != SUBXACT_EVENT_ABORT_SUB || nframes == 0)
		return;
	/* frames opened inside the aborted subtransaction will never be popped */
	level = GetCurrentTransactionNestLevel();
	while (nframes > 0 && frames[nframes - 1].nest_level >= level)
		nframes--;
	if (nframes == 0 && overflow_frames == 0)
		pce_unmark_self();
}

void
pce_classify_init(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = pce_ExecutorStart;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = pce_ExecutorEnd;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = pce_ProcessUtility;
	RegisterXactCallback(pce_xact_callback, NULL);
	RegisterSubXactCallback(pce_subxact_callback, NULL);
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
