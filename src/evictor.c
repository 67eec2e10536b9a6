/*-------------------------------------------------------------------------
 *
 * evictor.c
 *		The user-space half of the stock-kernel mechanism: keep the pages
 *		that scans brought into the page cache within a budget.
 *
 * The tracker (bpf/tracker.bpf.c) sends one record per folio that a marked
 * PID inserted into the page cache.  Here, in the background worker, the
 * records are coalesced into extents (contiguous page ranges of one file,
 * at most EXTENT_MAX_BYTES each) kept in arrival order.  When the extents
 * add up to more than pg_cache_ext.scan_budget, or are older than
 * pg_cache_ext.scan_max_age, the oldest are dropped with
 * posix_fadvise(POSIX_FADV_DONTNEED).  The kernel skips dirty pages in
 * that call, and starts their writeback instead: the first scan after a
 * bulk load sets hint bits, and PostgreSQL writes those pages back, so
 * most of its pages are dirty when they are dropped.  Such an extent waits
 * in a list of its own (its pages still cached count against the budget,
 * and as bytes_waiting) until cachestat says its writeback is over, then
 * is tracked again with the oldest (a sibling scan may need it).  The
 * kernel also leaves folios that are in use at that moment: locked while
 * readahead reads them in, or referenced while the scan copies them out.
 * With a large readahead window (read_ahead_kb of several MB, large
 * folios) and a fast reader, the oldest extent can be the one the scan is
 * reading; its pages would stay cached, no longer tracked.
 * So after the call we ask the kernel (cachestat) whether the extent's
 * clean pages are gone, and if not, the extent waits with the dirty ones
 * and is tried again every WAITING_RECHECK_MS, for a while (still_in_use); those pages
 * are in bytes_waiting, not in the budget (set_cached_unkept).
 * bytes_dropped counts what cachestat saw leave.  Where the kernel has no
 * cachestat (before 6.5) mincore() counts the cached pages but not the
 * dirty ones: an extent with pages left waits as a dirty one, and goes
 * back among the tracked ones every second (wait_without_dirty_count).
 *
 * An extent that another live marked reader of the same relation has yet
 * to read (a synchronized scan behind this one, pg_dump's COPY behind a
 * count(*)) is passed over and kept within the budget (sibling.c), after
 * what a reader reads next: the young pages just ahead of a reader that is
 * reading, its read-ahead (read_next).
 * Pages a helper writes back into a file a live scan reads (the
 * checkpointer writing what the scan dirtied) reach here as the scan's
 * records too (tracker.bpf.c, folios_added_for_scan).
 *
 * A promotion record says that a task that is not scanning has touched a
 * folio a scan brought in: those pages are marked kept in their extent, no
 * longer count against the budget, and are skipped when the extent is
 * dropped, so the OLTP load keeps what it has started to use.
 *
 * The records name a file by (device, inode, generation).  Relation files
 * are tracked, and for an external tree's records (a backup's tar) also the
 * other files of the data directory such as WAL; file_index.c says which
 * those are and opens them (the one rule, and an index kept current without
 * walking the tree on every miss); records of other files (temporary
 * files, files outside the data directory) are ignored.
 * A file that is gone (DROP TABLE, TRUNCATE, a removed segment) took its
 * pages with it: the extent is forgotten and counted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "catalog/catalog.h"
#include "common/relpath.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_cache_ext_int.h"

/* An extent never grows beyond this, so the budget is kept to one extent. */
#define EXTENT_MAX_BYTES	(1024 * 1024)
/* ... nor beyond this many pages (the size of its bitmap of kept pages) */
#define EXTENT_MAX_PAGES	256
/* a folio extends one of its file's newest extents (this many), while young */
#define EXTENT_GROW_LOOK	8
#define EXTENT_GROW_MS		200
/*
 * One batch (PCE_EVICT_BATCH_BYTES): the scan pages the worker reads from
 * the ring between two drops.  The ring is read in batches, so that a
 * backlog (the worker woke late, or a scan outran it) is dropped as it is
 * read, not after all of it: the scans' pages stay within the budget plus
 * one batch, plus what the ring still holds.  A large folio (up to 2 MiB)
 * fits in one.
 */
/* how long an extent whose clean pages are still cached after a drop is retried */
#define IN_USE_RETRY_MS		2000
/* batches read and dropped in one call, before the worker's other work */
#define MAX_BATCHES			64
/* what handle_event returns to stop the ring's consumption for a drop */
#define BATCH_FULL			(-1)
/*
 * waiting extents looked at per round, how often each at most, and the
 * longest wait for a writeback
 */
#define WAITING_CHECKS		64
#define WAITING_RECHECK_MS	50
#define WAITING_MAX_MS		60000
/* a waiting extent dirty again but not under writeback: start it again after */
#define WAITING_KICK_MS		1000
/* what a reader reads next is kept first this long (read_next) */
#define READ_AHEAD_YOUNG_MS	1000
/*
 * how long the worker's largest lag behind the ring lowers its drops'
 * target: beside an OLTP load on two CPUs, the seconds in which the worker
 * waited for a CPU came in clusters some 20 s apart (bench/siblings.sh,
 * CPU=1), and with a second's memory the first long wait of a cluster
 * found the target back at the budget (the table 12 MB over budget + one
 * batch, FINE=1).  The price: after one long wait, that much less is held
 * for siblings for this long.
 */
#define LAG_MEMORY_MS		30000
/*
 * extents looked at for the gauge bytes_held_for_siblings, and how often:
 * rounds came 150 times a second beside four scans at full speed, and
 * counting every round was most of the worker's CPU after the drops
 * (perf, bench/siblings.sh)
 */
#define HELD_COUNT_MAX_EXTENTS	4096
#define HELD_COUNT_MS			100
/* extents ranked by how soon a reader needs them, per drop (the oldest) */
#define RANKED_MAX_EXTENTS	1024
/* ... of at most this many looked at */
#define RANKED_LOOK_MAX		(4 * RANKED_MAX_EXTENTS)

struct TrackedFile;

typedef struct Extent
{
	dlist_node	node;			/* in the arrival-order list of all extents */
	dlist_node	file_node;		/* in its file's list, oldest first */
	struct TrackedFile *tf;		/* its file (tf->key), freed with its last extent */
	uint64		start;			/* first page */
	uint32		npages;
	uint32		nkept;			/* pages promoted: never dropped */
	uint64		kept[EXTENT_MAX_PAGES / 64];	/* which ones */
	TimestampTz born;
	TimestampTz in_use_since;	/* first drop that left clean pages cached */
	bool		is_waiting;		/* in the waiting list, not the arrival list */
	uint32		cached_unkept;	/* while waiting: its unkept pages still cached */
	bool		counted_dirty;	/* cached_unkept is in dirty_waiting_pages */
	TimestampTz waiting_since;	/* when a drop first met its dirty or in-use pages */
	bool		for_writeback;	/* waits for dirty pages (else: for in-use ones) */
	bool		for_write;		/* ... or for PostgreSQL to write some (page_left) */
	TimestampTz kicked_at;		/* when we last started their writeback */
	TimestampTz checked_at;		/* while waiting: when last looked at */
	uint64		read_next_pass;	/* the drop that counted it as read next */
} Extent;

/*
 * Per tracked file: its extents, the newest last (records of a sequential
 * read are coalesced into it; promotions search the list), and the
 * relation fork and segment it is, looked up once: every drop and every
 * round asks sibling.c about each extent, and looking the file up in the
 * index each time was a fifth of the worker's CPU (perf, bench/siblings.sh).
 */
typedef struct TrackedFile
{
	PceFileKey	key;
	dlist_head	extents;
	bool		every_scan;		/* tracked for every scan's records, not only
								 * an external tree's (file_index.c) */
	bool		is_relation;	/* a relation file: rel says which */
	PceRelationFile rel;
	uint64		rel_epoch;		/* the file index's epoch when rel was looked up */
} TrackedFile;

static MemoryContext evictor_cxt = NULL;
static struct ring_buffer *ring = NULL;
static int	ring_map_fd = -1;
static dlist_head extents = DLIST_STATIC_INIT(extents);
static HTAB *tracked_files = NULL;
static dlist_head waiting = DLIST_STATIC_INIT(waiting);
static uint64 tracked_pages = 0;	/* pages in extents, less the kept ones */
static uint64 waiting_pages = 0;	/* cached unkept pages of the waiting extents */
static uint64 dirty_waiting_pages = 0;	/* of them, of extents waiting for a writeback */
/*
 * Waiting pages up to which a drop leaves the pages of blocks dirty in
 * shared_buffers (page_left): an eighth of the budget
 * (LEAVE_FOR_WRITES_SHARE), set by drop_over_budget; beyond it the evictor
 * writes such blocks itself.  A page is left with the whole large folio it
 * is in (fadvise drops whole folios only), 128 kB with 128 kB read-ahead:
 * beside four scans of a table whose hint bits they set, 10-13 MB of such
 * blocks left 130-160 MB cached, over the 128 MB budget; with half the
 * budget as the cap, 1-15 MB of them kept 50-77 MB waiting all through a
 * VACUUM that trailed the scans, and the pages held for it had only the
 * other half (bench/siblings.sh: it read 200 MB from disk; 58 MB with an
 * eighth, 10-35 MB waiting).
 */
#define LEAVE_FOR_WRITES_SHARE	8
static uint64 leave_for_writes_below = 0;
static uint64 tracked_extents = 0;
static uint64 waiting_extents = 0;	/* of them, in the waiting list */
static long page_size = 4096;
/* pages recorded since the last drop, in this batch */
static uint64 batch_pages = 0;
/* calls of drop_over_budget so far (Extent.read_next_pass) */
static uint64 drop_passes = 0;
/*
 * Scan pages the worker tracked from the ring when it came back to it
 * (what arrived while it was away: asleep, or waiting for a CPU beside a
 * scan at full disk speed): the largest pass, until a smaller one comes
 * LAG_MEMORY_MS after it.  The drops go that far below the budget
 * (drop_target), so that what arrives before the next pass finds room
 * within the budget: the batch in flight and the page cache's moment
 * between a read and its record then stay within budget + one batch.
 */
static uint64 lag_pages = 0;
static TimestampTz lag_seen_at = 0;
/* pages tracked in this pass (records of untracked files not counted) */
static uint64 pass_tracked_pages = 0;

static void drop_over_budget(const PceSettings *settings, bool positions_fresh);
static void set_cached_unkept(Extent *ext, uint64 cached_pages);

static void
publish_gauges(void)
{
	if (!pce_shared)
		return;
	LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	pce_shared->extents_tracked = tracked_extents;
	pce_shared->bytes_tracked = tracked_pages * page_size;
	LWLockRelease(pce_shared->lock);
	pg_atomic_write_u64(&pce_shared->ustats[PCE_USTAT_BYTES_WAITING], waiting_pages * page_size);
}

/* ---- extents ---- */

static PceFileKey
event_file(const struct pce_folio_event *ev)
{
	return pce_file_key_from_kernel(ev->dev, ev->ino, ev->generation);
}

/*
 * Was this page of ext promoted?  An extent beyond the bitmap's size is a
 * single large folio, never kept in part (see promote_folio).
 */
static inline bool
page_kept(const Extent *ext, uint32 page)
{
	if (page >= EXTENT_MAX_PAGES)
		return false;
	return (ext->kept[page / 64] & (UINT64CONST(1) << (page % 64))) != 0;
}

/*
 * ext's relation fork and segment, for sibling.c; NULL for other files.
 * Looked up again once the file index has changed (rel.dir names a
 * directory of the index, which forgets a dropped database's).
 */
static const PceRelationFile *
extent_relation(const Extent *ext)
{
	TrackedFile *tf = ext->tf;

	if (tf->rel_epoch != pce_file_index_epoch())
	{
		tf->is_relation = tf->every_scan && pce_file_index_relation(&tf->key, &tf->rel);
		tf->rel_epoch = pce_file_index_epoch();
	}
	return tf->is_relation ? &tf->rel : NULL;
}

static void
forget_extent(Extent *ext)
{
	dlist_delete(&ext->file_node);
	if (dlist_is_empty(&ext->tf->extents))
	{
		PceFileKey	key = ext->tf->key;	/* the entry goes with it */

		hash_search(tracked_files, &key, HASH_REMOVE, NULL);
	}
	dlist_delete(&ext->node);
	if (ext->is_waiting)
	{
		set_cached_unkept(ext, 0);
		waiting_extents--;
	}
	else
		tracked_pages -= ext->npages - ext->nkept;
	tracked_extents--;
	pfree(ext);
}

/*
 * A waiting extent's pages that are still cached: those cachestat saw
 * (cached_pages), less the kept ones; the pages a drop did remove are
 * gone, and count no more.  Those waiting for a writeback count against
 * the budget (dirty_waiting_pages); those in use do not, like young
 * read-ahead: they are being read in, or already read again by a sibling
 * whose own record tracks them (counted here too, a sibling re-reading
 * what was dropped left nothing else in the budget, bench/siblings.sh).
 */
static void
set_cached_unkept(Extent *ext, uint64 cached_pages)
{
	uint32		unkept = cached_pages > ext->nkept ? (uint32) (cached_pages - ext->nkept) : 0;

	waiting_pages -= ext->cached_unkept;
	if (ext->counted_dirty)
		dirty_waiting_pages -= ext->cached_unkept;
	waiting_pages += unkept;
	ext->counted_dirty = ext->for_writeback && unkept > 0;
	if (ext->counted_dirty)
		dirty_waiting_pages += unkept;
	ext->cached_unkept = unkept;
}

/* A drop met dirty or in-use pages: move ext to the waiting list. */
static void
start_waiting(Extent *ext, uint64 cached_pages)
{
	dlist_delete(&ext->node);
	dlist_push_tail(&waiting, &ext->node);
	ext->is_waiting = true;
	ext->kicked_at = GetCurrentTimestamp();
	ext->checked_at = ext->kicked_at;	/* measured by the drop just now */
	if (ext->waiting_since == 0)	/* WAITING_MAX_MS caps all its waits */
		ext->waiting_since = ext->kicked_at;
	tracked_pages -= ext->npages - ext->nkept;
	set_cached_unkept(ext, cached_pages);
	waiting_extents++;
}

/* Is page of ext (not promoted) of a block dirty in shared_buffers? */
static bool
page_for_write(const Extent *ext, uint32 page)
{
	return !page_kept(ext, page) &&
		pce_page_dirty_in_shared_buffers(extent_relation(ext), ext->start + page, page_size);
}

/*
 * Pages of ext a drop leaves: promoted ones, and, if leave_for_writes,
 * those of a block dirty in shared_buffers, which PostgreSQL writes into
 * the page soon (shared_buffers.c: written into a dropped page, the write
 * can stall), while the pages waiting for a write or a writeback are
 * within leave_for_writes_below.  Beyond that, such blocks are written
 * now, into the cached page, and the drop waits for its writeback: with
 * the disk's 8 MB read-ahead a page is left with its 2 MB folio, and
 * after a bulk UPDATE every folio of the first scan holds blocks that
 * scan pruned.
 */
static bool
page_left(const Extent *ext, uint32 page, bool leave_for_writes, bool *left_for_write)
{
	if (page_kept(ext, page))
		return true;
	if (!leave_for_writes)
		return false;
	if (dirty_waiting_pages >= leave_for_writes_below)
	{
		pce_write_dirty_blocks(extent_relation(ext), ext->start + page, page_size);
		return false;
	}
	if (page_for_write(ext, page))
	{
		*left_for_write = true;
		return true;
	}
	return false;
}

/*
 * fadvise(DONTNEED) the pages of ext a drop does not leave (page_left);
 * false on error.  *left_for_write: some were left for PostgreSQL's write.
 */
static bool
drop_unkept_pages(int fd, Extent *ext, bool leave_for_writes, bool *left_for_write)
{
	bool		ok = true;
	uint32		page = 0;

	*left_for_write = false;
	while (page < ext->npages)
	{
		uint32		run_start;

		if (page_left(ext, page, leave_for_writes, left_for_write))
		{
			page++;
			continue;
		}
		run_start = page;
		while (page < ext->npages && !page_left(ext, page, leave_for_writes, left_for_write))
			page++;
		ok &= posix_fadvise(fd, (off_t) (ext->start + run_start) * page_size,
							(off_t) (page - run_start) * page_size,
							POSIX_FADV_DONTNEED) == 0;
		page++;					/* the page that ended the run is left (or the end) */
	}
	return ok;
}

/* Has PostgreSQL yet to write some of what a drop left of ext for it? */
static bool
still_dirty_in_shared_buffers(const Extent *ext)
{
	for (uint32 page = 0; page < ext->npages; page++)
		if (page_for_write(ext, page))
			return true;
	return false;
}

/*
 * The files of this round's extents, opened once and closed at the round's
 * end (close_round_files): a round drops and looks at many extents of a
 * few files (the relations being scanned), and opening, checking and
 * closing the file for each extent took six of its nine system calls
 * (bench/siblings.sh: 7,000 opens a second).  Opened anew each round, a
 * file that is gone is seen in the next one.
 */
typedef struct RoundFile
{
	PceFileKey	key;
	int			fd;
	bool		on_overlay;		/* cachestat(2) cannot see its pages */
} RoundFile;

#define ROUND_FILES_MAX		8
static RoundFile round_files[ROUND_FILES_MAX];
static int	n_round_files = 0;
static int	next_round_file = 0;	/* replaced next when all are in use */

static bool
same_file(const PceFileKey *a, const PceFileKey *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->generation == b->generation;
}

/* ext's file, open for this round; NULL if it is gone */
static const RoundFile *
round_file(const Extent *ext)
{
	RoundFile  *rf;
	int			fd;

	for (int i = 0; i < n_round_files; i++)
		if (same_file(&round_files[i].key, &ext->tf->key))
			return &round_files[i];
	fd = pce_file_index_open(&ext->tf->key);
	if (fd < 0)
		return NULL;
	if (n_round_files < ROUND_FILES_MAX)
		rf = &round_files[n_round_files++];
	else
	{
		rf = &round_files[next_round_file];
		next_round_file = (next_round_file + 1) % ROUND_FILES_MAX;
		close(rf->fd);
	}
	rf->key = ext->tf->key;
	rf->fd = fd;
	rf->on_overlay = pce_on_overlay(fd);
	return rf;
}

static void
close_round_files(void)
{
	for (int i = 0; i < n_round_files; i++)
		close(round_files[i].fd);
	n_round_files = 0;
	next_round_file = 0;
}

/* cachestat(2) of ext's pages (mincore() before 6.5 and on overlays: no dirty count) */
static bool
extent_cache(const RoundFile *rf, const Extent *ext, PceCacheStat *cs)
{
	return pce_cachestat_known(rf->fd, rf->on_overlay, ext->start * page_size,
							   (uint64) ext->npages * page_size, cs);
}

/* A waiting extent's writeback is over: back among the oldest tracked extents. */
static void
stop_waiting(Extent *ext)
{
	set_cached_unkept(ext, 0);
	dlist_delete(&ext->node);
	dlist_push_head(&extents, &ext->node);
	ext->is_waiting = false;
	waiting_extents--;
	tracked_pages += ext->npages - ext->nkept;
}

/*
 * bytes_dropped counts what left the cache: the drop's effect measured by
 * cachestat (or mincore), so a retried extent is not counted twice and
 * pages the kernel skipped (dirty, under writeback, in use) are not
 * counted at all.  When neither can count, what was asked.
 */
static void
count_dropped(const Extent *ext, bool measured, const PceCacheStat *before,
			  const PceCacheStat *after)
{
	int64		pages;

	if (measured)
		pages = Max((int64) before->cached - (int64) after->cached, 0);
	else
		pages = ext->npages - ext->nkept;
	pce_count(PCE_USTAT_BYTES_DROPPED, pages * page_size);
}

/*
 * Clean pages of ext still cached after a drop are in use right now: being
 * read in (on a throttled or busy disk, for hundreds of milliseconds) or
 * copied out.  They are retried, apart with the dirty ones, for
 * IN_USE_RETRY_MS; after that they are someone's again (read anew by
 * another reader, whose own record tracks them), and left.  (Retried a
 * fixed number of times instead, every batch, an extent under read-in on
 * a disk four scans share was forgotten with its pages within 50 ms: the
 * scanned table held 200 MB against a 32 MB budget, bench/siblings.sh.)
 */
static bool
still_in_use(Extent *ext)
{
	TimestampTz now = GetCurrentTimestamp();

	if (ext->in_use_since == 0)
		ext->in_use_since = now;
	return !TimestampDifferenceExceeds(ext->in_use_since, now, IN_USE_RETRY_MS);
}

typedef enum DropResult
{
	DROP_DONE,					/* dropped (or gone): forgotten */
	DROP_WAITING,				/* dirty or in-use pages: waiting apart */
} DropResult;

/*
 * Drop the pages of ext that were not promoted, and forget it.  Pages the
 * kernel skipped because they were dirty (a scan's hint bits, written back
 * by PostgreSQL) are under writeback now, which fadvise started: ext then
 * waits for it (see check_waiting); so does an extent whose blocks are
 * dirty in shared_buffers, whose pages the drop left (page_left).  Clean
 * pages still cached are being read in or copied out right now: ext waits
 * apart too, for a retry (still_in_use).
 */
static DropResult
drop_extent(Extent *ext, bool leave_for_writes)
{
	const RoundFile *rf = round_file(ext);
	PceCacheStat before,
				after;
	bool		measured;
	bool		ok;
	bool		left_for_write;
	DropResult	result = DROP_DONE;

	if (rf == NULL)
	{
		pce_count(PCE_USTAT_FILES_NOT_FOUND, 1);
		forget_extent(ext);
		return DROP_DONE;
	}
	measured = extent_cache(rf, ext, &before);
	ok = drop_unkept_pages(rf->fd, ext, leave_for_writes, &left_for_write);
	ext->for_write = left_for_write;
	measured &= extent_cache(rf, ext, &after);
	count_dropped(ext, measured, &before, &after);
	if (ok && measured && after.cached > ext->nkept)
	{
		/*
		 * without a dirty count (mincore), any page left may be dirty; pages
		 * left for PostgreSQL's write count as dirty ones while they wait
		 * (check_waiting_extent)
		 */
		ext->for_writeback = !after.counts_dirty || after.dirty + after.writeback > 0 ||
			left_for_write;
		if (ext->for_writeback || still_in_use(ext))
			result = DROP_WAITING;
	}
	if (result == DROP_WAITING && !ext->is_waiting)
		start_waiting(ext, after.cached);
	else if (result == DROP_WAITING)
		set_cached_unkept(ext, after.cached);
	else if (result == DROP_DONE)
	{
		pce_count(ok ? PCE_USTAT_EXTENTS_DROPPED : PCE_USTAT_DROP_ERRORS, 1);
		forget_extent(ext);
	}
	return result;
}

/*
 * Without a dirty count (mincore: kernels before 6.5, such as Debian 12's
 * 6.1, and overlays) the pages a drop left may be dirty, under writeback
 * or in use.  Every WAITING_KICK_MS the extent goes back among the oldest
 * tracked ones, as after a writeback: dropped again when over the budget
 * (fadvise starts the writeback of dirty pages itself), or kept for a
 * sibling.  (Forgetting it when more of its pages were cached than the
 * drop left, as read again by someone, left its dirty pages cached when
 * the checkpointer wrote back one dropped page: 18.9 MB over the budget in
 * t/018 on 6.1.)  Returns whether ext still waits.
 */
static bool
wait_without_dirty_count(Extent *ext, uint64 cached_pages, TimestampTz now)
{
	set_cached_unkept(ext, cached_pages);
	if (!TimestampDifferenceExceeds(ext->kicked_at, now, WAITING_KICK_MS))
		return true;
	stop_waiting(ext);
	return false;
}

/*
 * A waiting extent: once the writeback of its dirty pages is over, it is
 * one of the oldest tracked extents again, dropped or kept for a sibling
 * like any other (drop_over_budget: a sibling behind the scan that dirtied
 * them reads those pages next); its count is its pages, though some may
 * have left already, so the budget errs on the side of dropping.  An
 * extent waiting on in-use pages is dropped again (still_in_use).  Start
 * the writeback again if its pages were dirtied again meanwhile.  Pages a
 * drop left for PostgreSQL's write (page_left) wait while their blocks are
 * dirty in shared_buffers.  After WAITING_MAX_MS its pages are left to the
 * kernel, but for those left for a write: they are dropped then (a block
 * that only hint bits dirtied may wait for the next checkpoint).  Returns
 * whether it still waits.
 */
static bool
check_waiting_extent(Extent *ext, TimestampTz now)
{
	const RoundFile *rf;
	PceCacheStat cs;

	if (TimestampDifferenceExceeds(ext->waiting_since, now, WAITING_MAX_MS))
	{
		/* what was left for PostgreSQL's write goes now (not left again) */
		if (ext->for_write && drop_extent(ext, false) == DROP_DONE)
			return false;
		forget_extent(ext);
		return false;
	}
	rf = round_file(ext);
	if (rf == NULL || !extent_cache(rf, ext, &cs))
	{
		forget_extent(ext);		/* gone with its file */
		return false;
	}
	if (ext->for_write && still_dirty_in_shared_buffers(ext))
	{
		set_cached_unkept(ext, cs.cached);
		return true;			/* PostgreSQL has yet to write them */
	}
	if (cs.writeback == 0 && cs.dirty > 0 &&
		TimestampDifferenceExceeds(ext->kicked_at, now, WAITING_KICK_MS))
	{
		(void) sync_file_range(rf->fd, ext->start * page_size, (off_t) ext->npages * page_size,
							   SYNC_FILE_RANGE_WRITE);
		ext->kicked_at = now;
	}
	if (!cs.counts_dirty)
		return wait_without_dirty_count(ext, cs.cached, now);
	set_cached_unkept(ext, cs.cached);
	if (cs.dirty + cs.writeback > 0)
		return true;
	if (!ext->for_writeback || cs.cached <= ext->nkept)
		return drop_extent(ext, true) == DROP_WAITING;	/* in use: tried again */
	stop_waiting(ext);
	return false;
}

/*
 * Look at a few waiting extents per round, in turn: one still waiting
 * goes to the back of the list, so that extents queued behind a long
 * writeback still get their retries (an in-use extent has IN_USE_RETRY_MS).
 * Each at most every WAITING_RECHECK_MS: a writeback or a read-in takes
 * longer than a round, and rounds come many times a second beside busy
 * scans (looked at every round, 64 waiting extents cost 3,800 opens and
 * cachestat calls a second, bench/siblings.sh).
 */
static void
check_waiting(void)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		checks = Min(waiting_extents, WAITING_CHECKS);

	for (uint64 i = 0; i < checks && !dlist_is_empty(&waiting); i++)
	{
		Extent	   *ext = dlist_head_element(Extent, node, &waiting);

		if (ext->checked_at <= now &&
			!TimestampDifferenceExceeds(ext->checked_at, now, WAITING_RECHECK_MS))
			break;				/* the least recently looked at (a clock set back: due) */
		ext->checked_at = now;
		if (check_waiting_extent(ext, now))
			dlist_move_tail(&waiting, &ext->node);
	}
}

/*
 * The extent of tf that the folio of ev continues, if any: one of its
 * newest extents that ends where the folio starts and has room for it.
 * Several scans of one relation read it at once at different places (the
 * synchronized scans, VACUUM behind them), and their records interleave,
 * a read-ahead batch of each in turn: extending only the file's newest
 * extent would start a new extent at every turn, and each extent costs a
 * drop of its own.  Extents that waited are among the oldest (new pages
 * are not), and one older than EXTENT_GROW_MS would make the pages it
 * gains older than they are.
 */
static Extent *
continued_extent(TrackedFile *tf, const struct pce_folio_event *ev, uint32 max_pages)
{
	TimestampTz now = 0;
	int			looked_at = 0;
	dlist_iter	iter;

	dlist_reverse_foreach(iter, &tf->extents)
	{
		Extent	   *ext = dlist_container(Extent, file_node, iter.cur);

		if (looked_at++ >= EXTENT_GROW_LOOK)
			break;
		if (ext->waiting_since != 0 || ext->start + ext->npages != ev->index ||
			ext->npages + ev->nr_pages > max_pages)
			continue;
		if (now == 0)
			now = GetCurrentTimestamp();
		return ext->born > now || TimestampDifferenceExceeds(ext->born, now, EXTENT_GROW_MS) ?
			NULL : ext;
	}
	return NULL;
}

/*
 * A scan folio: extend the extent it continues, or start a new one.
 * Extents hold whole folios, because fadvise(DONTNEED) leaves alone a large
 * folio that the range covers only in part; so a folio larger than an
 * extent (large folios go up to 2 MiB) gets an extent of its own.
 */
static void
record_folio(const struct pce_folio_event *ev)
{
	PceFileKey		key = event_file(ev);
	bool		external = ev->kind == PCE_FOLIO_ADDED_EXTERNAL;
	TrackedFile *tf;
	bool		found;
	Extent	   *ext;
	uint32		max_pages = Min(EXTENT_MAX_PAGES, EXTENT_MAX_BYTES / page_size);

	tf = hash_search(tracked_files, &key, HASH_FIND, NULL);
	if (!tf)
	{
		/* the one rule: relation files, and for external trees more (file_index.c) */
		if (!pce_file_index_lookup(&key, ev->index, external))
			return;
		tf = hash_search(tracked_files, &key, HASH_ENTER, &found);
		dlist_init(&tf->extents);
		tf->every_scan = !external || pce_file_index_lookup(&key, ev->index, false);
		tf->rel_epoch = 0;		/* looked up at its first use (extent_relation) */
	}
	if (!external && !tf->every_scan)
		return;					/* a WAL segment an external tree read first */
	ext = continued_extent(tf, ev, max_pages);
	if (ext)
	{
		ext->npages += ev->nr_pages;
		tracked_pages += ev->nr_pages;
		return;
	}
	ext = MemoryContextAllocZero(evictor_cxt, sizeof(Extent));
	ext->tf = tf;
	ext->start = ev->index;
	ext->npages = ev->nr_pages;
	ext->born = GetCurrentTimestamp();
	dlist_push_tail(&extents, &ext->node);
	dlist_push_tail(&tf->extents, &ext->file_node);
	tracked_pages += ext->npages;
	tracked_extents++;
}

/*
 * A scan folio that an unmarked task touched: keep its pages.  Searched
 * from the newest extent of the file, where a page just read most likely
 * is.
 */
static void
promote_folio(const struct pce_folio_event *ev)
{
	PceFileKey		key = event_file(ev);
	TrackedFile *tf = hash_search(tracked_files, &key, HASH_FIND, NULL);
	dlist_node *cur;
	dlist_node *prev;
	uint64		promoted = 0;

	if (!tf)
		return;					/* already dropped, or its record was lost */
	for (cur = dlist_tail_node(&tf->extents); cur != &tf->extents.head; cur = prev)
	{
		Extent	   *ext = dlist_container(Extent, file_node, cur);
		uint64		from = Max(ext->start, ev->index);
		uint64		to = Min(ext->start + ext->npages, ev->index + ev->nr_pages);
		uint32		kept_before = ext->nkept;
		bool		last;

		prev = cur->prev;
		if (from >= to)
			continue;
		if (ext->npages > EXTENT_MAX_PAGES)
			ext->nkept = ext->npages;	/* one large folio, so all of it */
		for (uint64 p = from; p < to && ext->nkept < ext->npages; p++)
		{
			uint32		page = (uint32) (p - ext->start);

			if (page_kept(ext, page))
				continue;
			ext->kept[page / 64] |= UINT64CONST(1) << (page % 64);
			ext->nkept++;
		}
		promoted += ext->nkept - kept_before;
		if (ext->is_waiting)
			set_cached_unkept(ext, ext->cached_unkept + kept_before);
		else
			tracked_pages -= ext->nkept - kept_before;
		if (ext->nkept < ext->npages)
			continue;
		/* all kept: forget it, and with its file's last extent, the file */
		last = !dlist_has_prev(&tf->extents, cur) && !dlist_has_next(&tf->extents, cur);
		forget_extent(ext);
		if (last)
			break;
	}
	pce_count(PCE_USTAT_BYTES_PROMOTED, promoted * page_size);
}

static int
handle_event(void *ctx, void *data, size_t size)
{
	const struct pce_folio_event *ev = data;

	if (size < sizeof(*ev))
		return 0;
	if (ev->kind == PCE_FOLIO_PROMOTED)
		promote_folio(ev);
	else
	{
		uint64		tracked_before = tracked_pages;

		record_folio(ev);
		pass_tracked_pages += tracked_pages - tracked_before;
		batch_pages += ev->nr_pages;
	}
	pce_count(PCE_USTAT_RECORDS_READ, 1);
	/*
	 * libbpf's consume goes on as long as new records arrive: a reader as
	 * fast as this loop would keep it reading, never dropping.  So stop
	 * after one batch (this record is consumed), and drop before reading on.
	 */
	return batch_pages * page_size >= PCE_EVICT_BATCH_BYTES ? BATCH_FULL : 0;
}

/* ---- interface for the worker ---- */

bool
pce_evictor_start(void)
{
	HASHCTL		ctl;

	if (ring)
		return true;
	if (!evictor_cxt)
	{
		evictor_cxt = AllocSetContextCreate(TopMemoryContext, "pg_cache_ext evictor",
											ALLOCSET_DEFAULT_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(PceFileKey);
		ctl.entrysize = sizeof(TrackedFile);
		ctl.hcxt = evictor_cxt;
		tracked_files = hash_create("pg_cache_ext tracked files", 1024, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		page_size = sysconf(_SC_PAGESIZE);
	}

	/* checked like every pin: root's, and no other user may consume it */
	ring_map_fd = pce_pin_open(PCE_PIN_FOLIO_EVENTS);
	if (ring_map_fd < 0)
		return false;
	ring = ring_buffer__new(ring_map_fd, handle_event, NULL, NULL);
	if (!ring)
	{
		close(ring_map_fd);
		ring_map_fd = -1;
		return false;
	}
	pce_file_index_init();
	return true;
}

void
pce_evictor_stop(void)
{
	if (ring)
		ring_buffer__free(ring);
	ring = NULL;
	if (ring_map_fd >= 0)
		close(ring_map_fd);
	ring_map_fd = -1;
}

int
pce_evictor_fd(void)
{
	return ring ? ring_buffer__epoll_fd(ring) : -1;
}

/* A pass read pass_pages from the ring: the lag, if the most of late. */
static void
note_lag(uint64 pass_pages)
{
	TimestampTz now = GetCurrentTimestamp();

	if (pass_pages >= lag_pages ||
		TimestampDifferenceExceeds(lag_seen_at, now, LAG_MEMORY_MS))
	{
		lag_pages = pass_pages;
		lag_seen_at = now;
	}
}

/*
 * Read the records and keep within the budget: batches of records read
 * from the ring, each followed by a drop (drop_over_budget), until the ring
 * is empty (or MAX_BATCHES, for the worker's other work; the ring's fd is
 * still readable then, so the worker comes straight back); then the rest of
 * the round's work (pce_evictor_enforce), whose drop is the last batch's
 * when the ring ran dry (each drop ranks every tracked extent by what the
 * readers need: two in a row doubled that work).
 */
void
pce_evictor_run(const PceSettings *settings)
{
	pass_tracked_pages = 0;
	for (int batch = 0; ring && batch < MAX_BATCHES; batch++)
	{
		if (ring_buffer__consume(ring) != BATCH_FULL)
			break;
		if (batch + 1 < MAX_BATCHES)	/* the last one's is enforce's */
			drop_over_budget(settings, false);
		CHECK_FOR_INTERRUPTS();
	}
	note_lag(pass_tracked_pages);
	/* the last batch's drop, with the positions just read */
	pce_evictor_enforce(settings);
	/* less than a batch came: the worker has time to look at the directories */
	if (pass_tracked_pages * page_size < PCE_EVICT_BATCH_BYTES)
		pce_file_index_keep_current();
}

/*
 * The scans' pages a drop leaves: the budget, less the room for what
 * arrives before the next pass, at most half of the budget.  That is what
 * came while the worker was away of late (lag_pages), or what the readers
 * reading now bring in at once, a read-ahead window each
 * (pce_sibling_read_ahead_burst_pages), whichever is more.
 */
static uint64
drop_target(uint64 budget_pages)
{
	uint64		room = Max(lag_pages, pce_sibling_read_ahead_burst_pages());

	return budget_pages - Min(room, budget_pages / 2);
}

/* Older than pg_cache_ext.scan_max_age: dropped whoever needs it. */
static bool
too_old(const Extent *ext, const PceSettings *settings, TimestampTz now)
{
	return settings->scan_max_age_s > 0 &&
		TimestampDifferenceExceeds(ext->born, now, settings->scan_max_age_s * 1000);
}

/* What one drop keeps for the readers (passed_over) */
typedef struct Keeping
{
	uint64		keep_below;		/* held: a reader needs it sooner (soonest_needed) */
	uint64		target_pages;	/* kept within this (drop_target) */
	uint64		kept_pages;		/* kept so far, and the pages waiting for a writeback */
} Keeping;

/*
 * Does a reader read ext next?  Pages within two read-ahead windows ahead
 * of a reader that is reading (read_ahead.c, pce_sibling_reads_soon), or
 * beyond where any reader got (the front reader's read-ahead), while
 * young.  Pages being read in right now cannot be dropped (the drop
 * would only wait for them: still_in_use), and read-ahead dropped before
 * its reader got to it is read again, and the reader's next read-ahead
 * starts small: with 8 MB read-ahead, four
 * scanners beside VACUUM's pages waiting for their writeback brought 28%
 * of their pages in a second time themselves, in 8.5 times as many folios
 * (bench/siblings.sh, TRACE_REREAD=1).  The distance counts, not only
 * "beyond where any reader got": once scans loop or wrap, some reader got
 * everywhere, and a reader's read-ahead is no longer the front reader's.
 * Pages a second old are a table that grows while it is scanned, or a
 * position that does not move, which would make "ahead of a reader"
 * endless.
 */
static bool
read_next(const Extent *ext, PceScanPagesUse use, TimestampTz now)
{
	if (use == PCE_PAGES_DONE ||
		TimestampDifferenceExceeds(ext->born, now, READ_AHEAD_YOUNG_MS))
		return false;
	return use == PCE_PAGES_READ_NEXT ||
		pce_sibling_reads_soon(extent_relation(ext), ext->start, ext->npages,
							   pce_read_ahead_reach_pages(&ext->tf->key, page_size));
}

/*
 * The pages a reader reads next (read_next): of the young extents, newest
 * first, those a reader reads next are counted and marked with this drop's
 * pass (is_read_next), so that the ranking and the drop ask the mark.  The
 * list is in arrival order, but for extents back from a writeback, at its
 * head (stop_waiting): dropped once as not read next, they are not looked
 * at.  At most RANKED_LOOK_MAX are looked at per drop (a drop comes every
 * batch); young extents beyond them are ranked like older ones.
 */
static uint64
read_next_pages(TimestampTz now)
{
	uint64		pages = 0;
	int			looked_at = 0;
	dlist_iter	iter;

	if (pce_sibling_readers() == 0)
		return 0;
	dlist_reverse_foreach(iter, &extents)
	{
		Extent	   *ext = dlist_container(Extent, node, iter.cur);
		PceScanPagesUse use;

		if (looked_at++ >= RANKED_LOOK_MAX ||
			TimestampDifferenceExceeds(ext->born, now, READ_AHEAD_YOUNG_MS))
			break;
		use = pce_sibling_use(extent_relation(ext), ext->start, ext->npages, NULL);
		if (read_next(ext, use, now))
		{
			pages += ext->npages - ext->nkept;
			ext->read_next_pass = drop_passes;
		}
	}
	return pages;
}

/* Counted by this drop's read_next_pages? */
static inline bool
is_read_next(const Extent *ext)
{
	return ext->read_next_pass == drop_passes;
}

typedef struct NextUse
{
	uint64		pages_away;		/* pages a reader reads before it needs them */
	uint64		pages;
} NextUse;

static int
next_use_cmp(const void *a, const void *b)
{
	const NextUse *x = a;
	const NextUse *y = b;

	return x->pages_away < y->pages_away ? -1 : x->pages_away > y->pages_away;
}

/*
 * What the target holds for siblings, with two readers or more: what they
 * read soonest.  Held oldest first instead, pages for a reader far behind
 * (a VACUUM beside two count(*)) filled the target, and the pages between
 * a synchronized scan and the one just behind it were dropped and read
 * again.  Returns the distance (pages_away) below which the extents held
 * for a sibling fit in room_pages; with one reader, no limit.  (What a
 * reader reads next is not ranked: it has its room before the held pages,
 * read_next_pages.)
 */
static uint64
soonest_needed(uint64 room_pages, const PceSettings *settings, TimestampTz now)
{
	static NextUse uses[RANKED_MAX_EXTENTS];
	int			n = 0;
	uint64		sum = 0;
	int			looked_at = 0;
	dlist_iter	iter;

	if (pce_sibling_readers() < 2)
		return PG_UINT64_MAX;
	dlist_foreach(iter, &extents)
	{
		Extent	   *ext = dlist_container(Extent, node, iter.cur);

		if (n >= RANKED_MAX_EXTENTS || looked_at++ >= RANKED_LOOK_MAX)
			break;
		if (too_old(ext, settings, now))
			continue;			/* dropped whatever a reader needs */
		if (is_read_next(ext) ||
			pce_sibling_use(extent_relation(ext), ext->start, ext->npages,
							&uses[n].pages_away) != PCE_PAGES_FOR_SIBLING)
			continue;			/* (what a reader reads next is counted apart) */
		uses[n++].pages = ext->npages - ext->nkept;
	}
	qsort(uses, n, sizeof(NextUse), next_use_cmp);
	for (int i = 0; i < n; i++)
	{
		if (sum + uses[i].pages > room_pages)
			return uses[i].pages_away;
		sum += uses[i].pages;
	}
	return PG_UINT64_MAX;
}

/*
 * Pass over ext rather than drop it?  What a reader reads next is kept
 * first (read_next), and is counted in the target before anything else
 * (drop_over_budget), so that the pages held for siblings make room for it.
 * Within what is left of the target, pages a live reader of its relation
 * has yet to read (sibling.c): pages held for a sibling that has yet to
 * read what another read (with two readers or more, those needed soonest:
 * soonest_needed; else the oldest, which a reader far behind needs first),
 * and the front reader's older read-ahead.  What is kept starts at the
 * cached pages of the extents waiting for a writeback (kept_pages), so that
 * they and the kept ones together stay within the target.
 */
static bool
passed_over(const Extent *ext, PceScanPagesUse use, uint64 pages_away,
			Keeping *keeping)
{
	uint64		pages = ext->npages - ext->nkept;

	if (is_read_next(ext))
		return true;			/* counted by read_next_pages */
	if (use == PCE_PAGES_DONE)
		return false;
	if ((use == PCE_PAGES_READ_NEXT || pages_away < keeping->keep_below) &&
		keeping->kept_pages + pages <= keeping->target_pages)
	{
		keeping->kept_pages += pages;
		return true;
	}
	return false;
}

/*
 * Drop the oldest extents until within the settings' budget and age.  The
 * budget holds every scan page: extents no live reader needs any more go
 * first (they are the oldest), and of those a reader still needs, all but
 * what the target keeps for the readers (passed_over): what they read next
 * first, then what they need soonest.
 */
static void
drop_over_budget(const PceSettings *settings, bool positions_fresh)
{
	uint64		budget_pages = ((uint64) settings->scan_budget_mb * 1024 * 1024) / page_size;
	Keeping		keeping;
	TimestampTz now = GetCurrentTimestamp();
	bool		ranked = false;
	dlist_mutable_iter iter;

	keeping.target_pages = drop_target(budget_pages);
	leave_for_writes_below = budget_pages / LEAVE_FOR_WRITES_SHARE;
	/* pages waiting for their writeback are still the scans' pages */
	keeping.kept_pages = dirty_waiting_pages;
	keeping.keep_below = 0;
	batch_pages = 0;
	drop_passes++;
	/*
	 * where the readers are now: what they have read and have yet to read,
	 * and which of them read now (their read-ahead in the target)
	 */
	if (!positions_fresh && tracked_pages + dirty_waiting_pages > keeping.target_pages)
	{
		pce_sibling_refresh();
		keeping.target_pages = drop_target(budget_pages);
	}
	dlist_foreach_modify(iter, &extents)
	{
		Extent	   *oldest = dlist_container(Extent, node, iter.cur);
		PceScanPagesUse use;
		uint64		pages_away;
		bool		old = too_old(oldest, settings, now);

		if (tracked_pages + dirty_waiting_pages <= keeping.target_pages && !old)
			break;
		if (!ranked)
		{
			keeping.kept_pages += read_next_pages(now);
			keeping.keep_below =
				soonest_needed(keeping.target_pages - Min(keeping.kept_pages, keeping.target_pages),
							   settings, now);
			ranked = true;
		}
		use = pce_sibling_use(extent_relation(oldest), oldest->start, oldest->npages, &pages_away);
		if (!old && passed_over(oldest, use, pages_away, &keeping))
		{
			oldest->in_use_since = 0;	/* a later drop gets its own retries */
			continue;
		}
		(void) drop_extent(oldest, true);
	}
	/* every batch's: a round may read many, and t/018 compares them with the cache */
	publish_gauges();
}

/*
 * The gauge bytes_held_for_siblings: tracked pages that a live reader has
 * yet to read and another has read (at most HELD_COUNT_MAX_EXTENTS looked
 * at, the oldest: the tracked extents are within the budget but for a
 * backlog).  A round's count comes every HELD_COUNT_MS at most (throttled);
 * forgetting every extent publishes its zero at once.
 */
static void
publish_held_for_siblings(bool throttled)
{
	static TimestampTz counted_at = 0;
	TimestampTz now = GetCurrentTimestamp();
	dlist_iter	iter;
	uint64		held_pages = 0;
	int			looked_at = 0;

	if (!pce_shared ||
		(throttled && counted_at <= now &&
		 !TimestampDifferenceExceeds(counted_at, now, HELD_COUNT_MS)))
		return;
	counted_at = now;
	dlist_foreach(iter, &extents)
	{
		Extent	   *ext = dlist_container(Extent, node, iter.cur);

		if (looked_at++ >= HELD_COUNT_MAX_EXTENTS)
			break;
		if (pce_sibling_use(extent_relation(ext), ext->start, ext->npages, NULL) == PCE_PAGES_FOR_SIBLING)
			held_pages += ext->npages - ext->nkept;
	}
	pg_atomic_write_u64(&pce_shared->ustats[PCE_USTAT_BYTES_HELD_FOR_SIBLINGS],
						held_pages * page_size);
}

/*
 * Once per worker round: the waiting extents whose writeback is over, the
 * sibling scans' positions, then the budget (its drop publishes the
 * gauges), then what is held for siblings.
 */
void
pce_evictor_enforce(const PceSettings *settings)
{
	check_waiting();
	pce_sibling_refresh();		/* also when within the budget: forgets readers gone */
	drop_over_budget(settings, true);
	close_round_files();
	publish_held_for_siblings(true);
}

/* Forget every extent without dropping anything (mode off, mechanism gone). */
void
pce_evictor_forget_all(void)
{
	while (!dlist_is_empty(&extents))
		forget_extent(dlist_head_element(Extent, node, &extents));
	while (!dlist_is_empty(&waiting))
		forget_extent(dlist_head_element(Extent, node, &waiting));
	close_round_files();
	publish_gauges();
	publish_held_for_siblings(false);
}
