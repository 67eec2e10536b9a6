/*-------------------------------------------------------------------------
 *
 * compat.h
 *		What differs between the PostgreSQL versions pg_cache_ext builds
 *		against (13 to 18), in one place.  Only 15 is built and tested in
 *		CI; the other branches follow the server headers of those versions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PCE_COMPAT_H
#define PCE_COMPAT_H

#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"

/* 15 reserved GUC prefixes; before, unknown names only drew a warning */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/*
 * A GUC check hook's extra is freed by the GUC machinery: with guc_free()
 * since 16, which expects memory from guc_malloc(); with free() before.
 * guc_malloc(LOG, ...) returns NULL when out of memory, and the hook then
 * fails the setting.
 */
#if PG_VERSION_NUM >= 160000
#define pce_guc_malloc(size) guc_malloc(LOG, (size))
#else
#define pce_guc_malloc(size) malloc(size)
#endif

/* 16 renamed RelFileNode to RelFileLocator */
#if PG_VERSION_NUM >= 160000
#define PCE_REL_FILE(rel) ((rel)->rd_locator)
#else
#define PCE_REL_FILE(rel) ((rel)->rd_node)
#endif

/* 17 dropped PGPROC.pgprocno */
#if PG_VERSION_NUM >= 170000
#define PCE_PROCNO(proc) GetNumberFromPGProc(proc)
#else
#define PCE_PROCNO(proc) ((proc)->pgprocno)
#endif

/* 17 renamed the local backend-status accessor */
#if PG_VERSION_NUM >= 170000
#define pce_local_beentry(i) pgstat_get_local_beentry_by_index(i)
#else
#define pce_local_beentry(i) pgstat_fetch_stat_local_beentry(i)
#endif

/* 15 added InitMaterializedSRF(); before, set the tuplestore up by hand */
#if PG_VERSION_NUM < 150000
static inline void
InitMaterializedSRF(FunctionCallInfo fcinfo, bits32 flags)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcxt;
	TupleDesc	tupdesc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = CreateTupleDescCopy(tupdesc);
	MemoryContextSwitchTo(oldcxt);
}
#endif

#endif							/* PCE_COMPAT_H */
