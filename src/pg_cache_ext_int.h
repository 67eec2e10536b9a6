/*-------------------------------------------------------------------------
 *
 * pg_cache_ext_int.h
 *		Declarations shared by the files of the pg_cache_ext module.
 *
 * The module's files:
 *	pg_cache_ext.c	_PG_init, every GUC, shared memory
 *	bpf_maps.c		map transport: opening the pins, reading and writing maps
 *	status.c		settings snapshot, knobs from it, mechanism in force,
 *					kernel probe
 *	registry.c		marking/unmarking PIDs (kernel map + shared-memory mirror)
 *	classify.c		executor and utility hooks: what counts as a scan; the
 *					rule for background processes
 *	scan_commands.c	the utility-command names of pg_cache_ext.scan_commands
 *	worker.c		the background worker: stale marks, autovacuum and base
 *					backup marks, knobs, and the stock-kernel evictor
 *	evictor.c		stock-kernel evictor: scan folios kept within a budget
 *	file_index.c	which files the evictor tracks (one rule), and finding
 *					them by (device, inode) without walking the cluster
 *	functions.c		the SQL-callable functions
 *	cachestat.c		the cachestat() system call (page cache residency)
 *	aio.c			PostgreSQL 18+ asynchronous I/O: I/O workers and the owners of
 *					I/O, so that reads are attributed to the process they are for
 *	sibling.c		sibling scanners: scan pages kept until every live marked
 *					reader of the same relation has passed them
 *	read_ahead.c	the disks' read-ahead, which the evictor leaves to the
 *					readers
 *	lap_start.c		marked synchronized scans start where a VACUUM or a
 *					marked COPY TO of their table is
 *	shared_buffers.c	scan pages dirty in shared_buffers, which the evictor
 *					leaves cached until PostgreSQL wrote them back
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_CACHE_EXT_MODULE_H
#define PG_CACHE_EXT_MODULE_H

#include <linux/types.h>

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/block.h"
#include "storage/lwlock.h"

#include "pg_cache_ext.h"		/* the BPF/C contract, in bpf/ */

/* pg_cache_ext.mode: PceMode and its names, shared with the loader */
#include "pce_modes.h"

/* pg_cache_ext.scan */
typedef enum PceSessionScan
{
	PCE_SCAN_AUTO,
	PCE_SCAN_ON,
	PCE_SCAN_OFF
} PceSessionScan;

/* GUCs (pg_cache_ext.c) */
extern int	pce_mode;
extern char *pce_bpffs_dir;
extern char *pce_cgroup;
extern int	pce_scan_threshold;
extern char *pce_scan_commands;
extern int	pce_scan_commands_mask;
extern bool pce_mark_autovacuum;
extern bool pce_mark_basebackup;
extern int	pce_session_scan;
extern int	pce_scan_budget_mb;
extern int	pce_scan_max_age_s;
extern bool pce_promote_on_access;
extern bool pce_drop_unread_wal_enabled;
extern int	pce_scan_min_percent;
extern bool pce_scans_join_vacuum;
extern bool pce_scans_join_copy;

/*
 * Counters kept by the module itself (the BPF programs keep theirs in the
 * stats map): X(symbol, name as cache_ext_stats() shows it).
 */
#define PCE_USTAT_TABLE(X) \
	X(MARKS, "marks") \
	X(UNMARKS, "unmarks") \
	X(STALE_MARKS_REMOVED, "stale_marks_removed") \
	X(MAP_FULL, "map_full") \
	X(MAP_ERRORS, "map_errors") \
	X(RECORDS_READ, "records_read") \
	X(EXTENTS_DROPPED, "extents_dropped") \
	X(BYTES_DROPPED, "bytes_dropped") \
	X(FILES_NOT_FOUND, "files_not_found") \
	X(DROP_ERRORS, "drop_errors") \
	X(BYTES_PROMOTED, "bytes_promoted") \
	X(SCANS_JOINED_VACUUM, "scans_joined_vacuum")	/* new in 1.2 */ \
	X(BYTES_WAITING, "bytes_waiting")	/* a gauge: scan pages still cached after \
										 * a drop (dirty or in use) */ \
	X(BYTES_HELD_FOR_SIBLINGS, "bytes_held_for_siblings")	/* a gauge: scan pages in the \
															 * budget kept for a sibling scan \
															 * that has yet to read them */

#define PCE_USTAT_ENUM_ENTRY(sym, name) PCE_USTAT_##sym,
typedef enum PceUstat
{
	PCE_USTAT_TABLE(PCE_USTAT_ENUM_ENTRY)
	PCE_USTAT__COUNT
} PceUstat;
#undef PCE_USTAT_ENUM_ENTRY

/*
 * Who holds a process's mark (PceScanSlot.holders).  A process can be
 * marked by its own statements and by the background worker at once (an
 * autovacuum worker whose index expression runs a query): the kernel entry
 * stays until the last holder lets go.
 */
#define PCE_HOLDER_SELF		0x01	/* the process's own marking statements */
#define PCE_HOLDER_WORKER	0x02	/* the background worker (autovacuum, base backup) */
#define PCE_HOLDERS_ALL		(PCE_HOLDER_SELF | PCE_HOLDER_WORKER)

/* One marked process, for cache_ext_scans(); indexed by pgprocno. */
typedef struct PceScanSlot
{
	int			pid;			/* 0 when the slot is free */
	uint64		start_ticks;	/* with pid, which process (PIDs are reused) */
	uint8		holders;		/* PCE_HOLDER_* bits, never 0 while pid != 0 */
	uint32		reason;			/* enum pce_reason */
	Oid			relid;
	Oid			dboid;
	Oid			userid;			/* session user, as pg_stat_activity has it */
	TimestampTz since;
	bool		in_kernel;		/* did the map update succeed? */
} PceScanSlot;

/* Where a VACUUM scanning a heap is, as the worker last saw it (lap_start.c). */
typedef struct PceVacuumBlock
{
	int			pid;			/* the VACUUM's process, with its pgprocno */
	int			procno;
	Oid			dboid;
	Oid			relid;
	BlockNumber block;			/* heap_blks_scanned */
} PceVacuumBlock;

/* VACUUMs followed at once (autovacuum_max_workers is 3 by default) */
#define PCE_MAX_VACUUMS		16

/*
 * Where a marked COPY TO reads a relation fork, as the worker last saw it
 * (lap_start.c, from sibling.c's positions): its heap, or its TOAST table.
 */
typedef struct PceCopyBlock
{
	int			pid;			/* the COPY's process, with its pgprocno */
	int			procno;
	Oid			dboid;
	Oid			relid;			/* the relation copied (the mark's) */
	Oid			spcoid;			/* the file it reads there: tablespace, number */
	uint32		relfilenode;
	BlockNumber block;
} PceCopyBlock;

/*
 * places of COPYs followed at once (a heap and its TOAST table are two;
 * pg_dump --jobs runs a COPY per job)
 */
#define PCE_MAX_COPIES		64

/* a kernel probe's result, kept in shared memory (0 until probed) */
typedef enum PceKernelProbe
{
	PCE_PROBE_UNKNOWN = 0,
	PCE_PROBE_NO,
	PCE_PROBE_YES
} PceKernelProbe;

typedef struct PceShared
{
	LWLock	   *lock;			/* protects slots[], vacuums[], copies[] and the
								 * worker fields */
	pg_atomic_uint64 ustats[PCE_USTAT__COUNT];
	pg_atomic_uint64 marks_by_reason[PCE_REASON__COUNT];
	TimestampTz stats_reset;
	TimestampTz started;		/* server start (shared memory init) */
	int			worker_pid;
	uint64		extents_tracked;	/* evictor gauges, written by the worker */
	uint64		bytes_tracked;
	char		worker_status[256];
	PceKernelProbe btf_has_cache_ext;	/* see pce_kernel_btf_has_cache_ext() */
	TimestampTz vacuums_at;		/* when the worker wrote vacuums[] */
	int			nvacuums;
	PceVacuumBlock vacuums[PCE_MAX_VACUUMS];
	TimestampTz copies_at;		/* when the worker wrote copies[] */
	int			ncopies;
	PceCopyBlock copies[PCE_MAX_COPIES];
	int			nslots;
	PceScanSlot slots[FLEXIBLE_ARRAY_MEMBER];
} PceShared;

extern PceShared *pce_shared;

static inline void
pce_count(PceUstat which, uint64 n)
{
	if (pce_shared)
		pg_atomic_fetch_add_u64(&pce_shared->ustats[which], n);
}

/* bpf_maps.c */
typedef enum PceMapsState
{
	PCE_MAPS_OK,
	PCE_MAPS_NOT_OPEN,			/* not tried yet */
	PCE_MAPS_UNAVAILABLE		/* tried; pce_maps_error says why */
} PceMapsState;

extern const char *pce_pin_dir(void);
extern bool pce_pin_present(const char *name);
extern int	pce_pin_open(const char *name);
extern bool pce_maps_open(bool force);
extern void pce_maps_close(void);
extern const char *pce_maps_error(void);
extern int	pce_map_fd(const char *name);
extern uint64 pce_maps_generation(void);
extern int	pce_map_update_mark(__u32 pid, const struct pce_scan_mark *mark);
extern int	pce_map_delete_mark(__u32 pid);
extern bool pce_map_has_mark(__u32 pid);
extern bool pce_map_read_mark(__u32 pid, struct pce_scan_mark *mark);
typedef bool (*PceMarkVisitor) (__u32 pid, const struct pce_scan_mark *mark, void *arg);
extern int	pce_map_walk_marks(PceMarkVisitor visit, void *arg);
extern bool pce_map_read_stats(uint64 *out);
extern bool pce_map_read_loader_info(struct pce_loader_info *out);
extern bool pce_map_write_knobs(const struct pce_knobs *knobs);
extern int	pce_map_put(const char *name, __u32 key, const void *value);
extern int	pce_map_remove(const char *name, __u32 key);
extern bool pce_map_get(const char *name, __u32 key, void *value);
extern int	pce_map_keys(const char *name, __u32 *keys, int max);

/*
 * status.c: the settings that reach the evictor and the BPF knobs, taken
 * once per configuration reload and passed explicitly.
 */
typedef struct PceSettings
{
	int			mode;			/* PceMode */
	bool		promote_on_access;
	int			scan_min_percent;
	int			scan_budget_mb;
	int			scan_max_age_s;
	bool		drop_unread_wal;
} PceSettings;

extern void pce_settings_snapshot(PceSettings *settings);
extern void pce_knobs_from_settings(const PceSettings *settings, struct pce_knobs *knobs);
extern bool pce_kernel_btf_has_cache_ext(void);
extern const char *pce_read_hook_program_name(uint32 hook);
extern const char *pce_mode_name(int mode);
extern const char *pce_mechanism_name(uint32 mech);
extern enum pce_mechanism pce_current_mechanism(const PceSettings *settings, const char **why,
												struct pce_loader_info *info);

/* registry.c */
extern bool pce_mark_self(enum pce_reason reason, Oid relid);
extern void pce_unmark_self(void);
extern uint64 pce_mark_other(int pid, int procno, enum pce_reason reason, Oid relid, Oid dboid,
							 Oid userid);
extern void pce_unmark_other(int pid, int procno, uint64 start_ticks);
extern bool pce_process_mark(int pid, int procno, enum pce_reason *reason, Oid *relid);
extern int	pce_remove_stale_marks(bool sweep_slots);

/* aio.c */
extern bool pce_aio_owner_marks(void);
extern void pce_aio_mark_owner(int procno, int pid, uint64 proc_start_ticks);
extern void pce_aio_unmark_owner(int procno, int pid);
extern int	pce_aio_remove_stale_owners(void);
extern void pce_aio_register_workers(void);
extern const char *pce_aio_attribution(char *buf, size_t len);

/* classify.c */
extern void pce_classify_init(void);
struct PgBackendStatus;
extern enum pce_reason pce_background_reason(const struct PgBackendStatus *be);
extern const char *const pce_reason_names[PCE_REASON__COUNT];

/* lap_start.c */
struct PlanState;
extern void pce_lap_start_plan(struct PlanState *planstate);
extern void pce_lap_start_copy(Oid relid);
extern void pce_publish_vacuum_blocks(int nbackends);
extern void pce_publish_copy_blocks(void);

/* worker.c */
extern void pce_worker_register(void);
PGDLLEXPORT void pce_worker_main(Datum arg);

/* cachestat.c */
typedef struct PceCacheStat
{
	uint64		cached;			/* pages in the page cache */
	uint64		dirty;
	uint64		writeback;		/* being written back now */
	bool		counts_dirty;	/* false: mincore, dirty and writeback unknown (0) */
} PceCacheStat;
extern bool pce_cachestat(int fd, uint64 off, uint64 len, PceCacheStat *cs);
extern bool pce_cachestat_known(int fd, bool on_overlay, uint64 off, uint64 len,
								PceCacheStat *cs);
extern bool pce_on_overlay(int fd);
extern bool pce_file_residency(int fd, off_t size, uint64 *cached, uint64 *dirty,
							   const char **method);

/* file_index.c: a file the tracker names (generation 0: not recorded) */
typedef struct PceFileKey
{
	dev_t		dev;
	ino_t		ino;
	uint32		generation;
} PceFileKey;
extern bool pce_is_relation_file_name(const char *name);
extern void pce_file_index_init(void);
extern bool pce_file_index_lookup(const PceFileKey *key, uint64 page, bool external);
extern void pce_file_index_keep_current(void);
extern int	pce_file_index_open(const PceFileKey *key);
typedef struct PceRelationFile
{
	const void *dir;			/* its database directory (identity only) */
	Oid			spcoid;			/* that directory's tablespace and database */
	Oid			dboid;
	uint32		relfilenode;
	char		fork;			/* 'm'ain, 'f'sm, 'v'm, 'i'nit */
	uint32		segno;			/* segment: .1, .2, ... (0 for the first) */
} PceRelationFile;
extern bool pce_file_index_relation(const PceFileKey *key, PceRelationFile *rf);
extern uint64 pce_file_index_epoch(void);
extern PceFileKey pce_file_key_from_kernel(__u32 dev, __u64 ino, __u32 generation);

/*
 * sibling.c: scan pages a live marked reader of the same relation has yet to
 * read (file: the relation fork and segment of the pages, NULL for a file
 * that is no relation's; pce_file_index_relation)
 */
extern void pce_sibling_refresh(void);
typedef enum PceScanPagesUse
{
	PCE_PAGES_DONE,				/* no live reader has yet to read them */
	PCE_PAGES_FOR_SIBLING,		/* one has, and another read them already */
	PCE_PAGES_READ_NEXT			/* ahead of every reader: read-ahead */
} PceScanPagesUse;
extern PceScanPagesUse pce_sibling_use(const PceRelationFile *file, uint64 start, uint32 npages,
									   uint64 *pages_away);
extern int	pce_sibling_readers(void);
extern uint64 pce_sibling_read_ahead_burst_pages(void);
extern int	pce_sibling_copy_places(PceCopyBlock *out, int max);
extern bool pce_sibling_reads_soon(const PceRelationFile *file, uint64 start, uint32 npages,
								   uint64 reach_pages);

/* shared_buffers.c: pages PostgreSQL has yet to write back */
extern bool pce_page_dirty_in_shared_buffers(const PceRelationFile *file, uint64 page,
											 long page_size);
extern void pce_write_dirty_blocks(const PceRelationFile *file, uint64 page,
								   long page_size);
extern void pce_close_written_files(void);

/* wal.c: WAL no process will read */
extern void pce_drop_unread_wal(bool enabled);

/* read_ahead.c: how far ahead of a sequential reader the kernel reads */
extern uint64 pce_read_ahead_reach_pages(const PceFileKey *file, long page_size);

/* evictor.c */
extern bool pce_evictor_start(void);
extern void pce_evictor_stop(void);
extern int	pce_evictor_fd(void);
extern void pce_evictor_run(const PceSettings *settings);
extern void pce_evictor_enforce(const PceSettings *settings);
extern void pce_evictor_forget_all(void);

#endif							/* PG_CACHE_EXT_MODULE_H */
