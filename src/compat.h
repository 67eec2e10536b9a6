/*-------------------------------------------------------------------------
 *
 * compat.h
 *		What differs between the PostgreSQL versions pg_cache_ext builds
 *		against, in one place.  Supported and tested: 15 (Debian 12), 17
 *		(Debian 13) and 18 (Debian forky); each guard below was checked
 *		against the server headers of 15.18, 17 and 18 as Debian ships them.
 *		16 lies between and takes the 16 branches, but is not built here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PCE_COMPAT_H
#define PCE_COMPAT_H

#include "common/relpath.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"

#if PG_VERSION_NUM < 150000
#error "pg_cache_ext needs PostgreSQL 15 or later"
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
#define PCE_REL_NUMBER(rel) ((rel)->rd_locator.relNumber)
#define PCE_REL_TABLESPACE(rel) ((rel)->rd_locator.spcOid)
#else
#define PCE_REL_FILE(rel) ((rel)->rd_node)
#define PCE_REL_NUMBER(rel) ((rel)->rd_node.relNode)
#define PCE_REL_TABLESPACE(rel) ((rel)->rd_node.spcNode)
#endif

/*
 * 18's relpathbackend() returns a RelPathStr by value; before, a palloc'd
 * string.  pce_relpath() copies the path into dst either way.
 */
#if PG_VERSION_NUM >= 180000
#define pce_relpath(dst, len, rlocator, backend, fork) \
	strlcpy((dst), relpathbackend((rlocator), (backend), (fork)).str, (len))
#else
#define pce_relpath(dst, len, rlocator, backend, fork) \
	do { \
		char	   *pce_path_ = relpathbackend((rlocator), (backend), (fork)); \
		\
		strlcpy((dst), pce_path_, (len)); \
		pfree(pce_path_); \
	} while (0)
#endif

/* 16 renamed RelFileNode, a relation file's tablespace, database and number */
#if PG_VERSION_NUM >= 160000
#include "storage/relfilelocator.h"
typedef RelFileLocator PceRelFileLocator;
#define pce_rel_file_locator(spc, db, relnumber) \
	((RelFileLocator) {.spcOid = (spc),.dbOid = (db),.relNumber = (relnumber)})
#else
#include "storage/relfilenode.h"
typedef RelFileNode PceRelFileLocator;
#define pce_rel_file_locator(spc, db, relnumber) \
	((RelFileNode) {.spcNode = (spc),.dbNode = (db),.relNode = (relnumber)})
#endif

/*
 * 16 made BufferTag's relation a RelFileLocator, set by InitBufferTag().
 * Only for the files that include storage/buf_internals.h (the buffer
 * manager's internals) before this one.
 */
#ifdef BUFMGR_INTERNALS_H
static inline void
pce_init_buffer_tag(BufferTag *tag, PceRelFileLocator rlocator, ForkNumber fork,
					BlockNumber block)
{
#if PG_VERSION_NUM >= 160000
	InitBufferTag(tag, &rlocator, fork, block);
#else
	INIT_BUFFERTAG(*tag, rlocator, fork, block);
#endif
}
#endif							/* BUFMGR_INTERNALS_H */

/* 17 added the WAL summarizer, a process that reads WAL (summarize_wal) */
#if PG_VERSION_NUM >= 170000
#include "postmaster/walsummarizer.h"
#define pce_wal_summarized() (summarize_wal)
#else
#define pce_wal_summarized() false
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

#endif							/* PCE_COMPAT_H */
