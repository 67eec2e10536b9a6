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
 * that call (it starts their writeback instead), so nothing is lost.  It
 * also leaves folios that are in use at that moment: locked while
 * readahead reads them in, or referenced while the scan copies them out.
 * With a large readahead window (read_ahead_kb of several MB, large
 * folios) and a fast reader, the oldest extent can be the one the scan is
 * reading; its pages would stay cached, no longer tracked.  So after the
 * call we ask the kernel (cachestat) whether the extent's pages are gone,
 * and if not, keep the extent and try again at the next round (a few times
 * at most), without dropping newer extents meanwhile.
 *
 * A promotion record says that a task that is not scanning has touched a
 * folio a scan brought in: those pages are marked kept in their extent, no
 * longer count against the budget, and are skipped when the extent is
 * dropped, so the OLTP load keeps what it has started to use.
 *
 * The records name a file by (device, inode).  To open it we keep a map
 * from (device, inode) to path for every file of the data directory and
 * its tablespaces, rebuilt at most once a second when a lookup misses.  A
 * file that is gone (DROP TABLE, TRUNCATE, a removed segment) took its
 * pages with it: the extent is forgotten and counted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
/* times an extent whose pages are still cached after a drop is retried */
#define DROP_RETRIES		5

typedef struct FileKey
{
	dev_t		dev;
	ino_t		ino;
} FileKey;

typedef struct Extent
{
	dlist_node	node;			/* in the arrival-order list of all extents */
	dlist_node	file_node;		/* in its file's list, oldest first */
	FileKey		file;
	uint64		start;			/* first page */
	uint32		npages;
	uint32		nkept;			/* pages promoted: never dropped */
	uint64		kept[EXTENT_MAX_PAGES / 64];	/* which ones */
	TimestampTz born;
	int			retries;		/* drops that left pages cached */
} Extent;

/*
 * Per tracked file: its extents, the newest last (records of a sequential
 * read are coalesced into it; promotions search the list).
 */
typedef struct TrackedFile
{
	FileKey		key;
	dlist_head	extents;
} TrackedFile;

/* (device, inode) -> path relative to the data directory */
typedef struct FilePath
{
	FileKey		key;
	char	   *path;
} FilePath;

static MemoryContext evictor_cxt = NULL;
static struct ring_buffer *ring = NULL;
static int	ring_map_fd = -1;
static dlist_head extents = DLIST_STATIC_INIT(extents);
static HTAB *tracked_files = NULL;
static HTAB *file_paths = NULL;
static TimestampTz paths_built_at = 0;
static uint64 tracked_pages = 0;	/* pages in extents, less the kept ones */
static uint64 tracked_extents = 0;
static long page_size = 4096;

static void
publish_gauges(void)
{
	if (!pce_shared)
		return;
	LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
	pce_shared->extents_tracked = tracked_extents;
	pce_shared->bytes_tracked = tracked_pages * page_size;
	LWLockRelease(pce_shared->lock);
}

/* ---- (device, inode) -> path ---- */

static void
add_dir_files(const char *reldir, int depth)
{
	char		dirpath[MAXPGPATH];
	DIR		   *dir;
	struct dirent *de;

	snprintf(dirpath, sizeof(dirpath), "%s/%s", DataDir, reldir);
	dir = opendir(dirpath);
	if (!dir)
		return;
	while ((de = readdir(dir)) != NULL)
	{
		char		relpath[MAXPGPATH];
		char		fullpath[MAXPGPATH];
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(relpath, sizeof(relpath), "%s/%s", reldir, de->d_name);
		snprintf(fullpath, sizeof(fullpath), "%s/%s", DataDir, relpath);
		/* stat, not lstat: pg_tblspc holds symlinks to the tablespaces */
		if (stat(fullpath, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
		{
			if (depth > 0)
				add_dir_files(relpath, depth - 1);
		}
		else if (S_ISREG(st.st_mode))
		{
			FileKey		key = {st.st_dev, st.st_ino};
			FilePath   *fp;
			bool		found;

			fp = hash_search(file_paths, &key, HASH_ENTER, &found);
			if (found)
				pfree(fp->path);
			fp->path = MemoryContextStrdup(evictor_cxt, relpath);
		}
	}
	closedir(dir);
}

static void
rebuild_paths(void)
{
	HASH_SEQ_STATUS seq;
	FilePath   *fp;

	hash_seq_init(&seq, file_paths);
	while ((fp = hash_seq_search(&seq)) != NULL)
	{
		pfree(fp->path);
		hash_search(file_paths, &fp->key, HASH_REMOVE, NULL);
	}
	/* base/<db>/<file>, global/<file>, pg_tblspc/<oid>/<version>/<db>/<file>, pg_wal/<segment> */
	add_dir_files("base", 1);
	add_dir_files("global", 0);
	add_dir_files("pg_tblspc", 3);
	/* WAL written by VACUUM or CREATE INDEX is scan traffic too */
	add_dir_files("pg_wal", 0);
	paths_built_at = GetCurrentTimestamp();
}

/* Open the file of key for reading; -1 if it is gone. */
static int
open_tracked_file(const FileKey *key)
{
	for (int attempt = 0; attempt < 2; attempt++)
	{
		FilePath   *fp = hash_search(file_paths, key, HASH_FIND, NULL);

		if (fp)
		{
			char		path[MAXPGPATH];
			struct stat st;
			int			fd;

			snprintf(path, sizeof(path), "%s/%s", DataDir, fp->path);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			/* the inode may have been freed and reused by another file */
			if (fd >= 0 && fstat(fd, &st) == 0 &&
				st.st_dev == key->dev && st.st_ino == key->ino)
				return fd;
			if (fd >= 0)
				close(fd);
		}
		if (attempt == 0 &&
			TimestampDifferenceExceeds(paths_built_at, GetCurrentTimestamp(), 1000))
			rebuild_paths();
		else
			break;
	}
	return -1;
}

/* ---- extents ---- */

static FileKey
event_file(const struct pce_folio_event *ev)
{
	FileKey		key;

	memset(&key, 0, sizeof(key));
	/* the kernel's internal dev_t is major << 20 | minor */
	key.dev = makedev(ev->dev >> 20, ev->dev & 0xfffff);
	key.ino = ev->ino;
	return key;
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

static void
forget_extent(Extent *ext)
{
	TrackedFile *tf = hash_search(tracked_files, &ext->file, HASH_FIND, NULL);

	dlist_delete(&ext->file_node);
	if (tf && dlist_is_empty(&tf->extents))
		hash_search(tracked_files, &ext->file, HASH_REMOVE, NULL);
	dlist_delete(&ext->node);
	tracked_pages -= ext->npages - ext->nkept;
	tracked_extents--;
	pfree(ext);
}

/* fadvise(DONTNEED) one run of pages of ext; false on error */
static bool
drop_pages(int fd, const Extent *ext, uint32 first, uint32 count)
{
	off_t		off = (off_t) (ext->start + first) * page_size;
	off_t		len = (off_t) count * page_size;

	return posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED) == 0;
}

/*
 * How many pages of ext the page cache holds now, kept ones included; -1
 * where cachestat(2) is missing (kernels before 6.5).
 */
static int64
extent_cached_pages(int fd, const Extent *ext)
{
	uint64		nr_cache,
				nr_dirty;

	if (!pce_cachestat(fd, ext->start * page_size, (uint64) ext->npages * page_size,
					   &nr_cache, &nr_dirty))
		return -1;
	return (int64) nr_cache;
}

/*
 * bytes_dropped counts what left the cache: the drop's effect measured by
 * cachestat, so a retried extent is not counted twice and pages the kernel
 * skipped are not counted at all.  Without cachestat, what was asked.
 */
static void
count_dropped(const Extent *ext, int64 cached_before, int64 cached_after)
{
	int64		pages;

	if (cached_before >= 0 && cached_after >= 0)
		pages = Max(cached_before - cached_after, 0);
	else
		pages = ext->npages - ext->nkept;
	pce_count(PCE_USTAT_BYTES_DROPPED, pages * page_size);
}

/*
 * Drop the pages of ext that were not promoted, and forget it; or, if some
 * are still cached (being read in or copied out right now), keep it for a
 * retry and return false.
 */
static bool
drop_extent(Extent *ext)
{
	int			fd = open_tracked_file(&ext->file);

	if (fd < 0)
		pce_count(PCE_USTAT_FILES_NOT_FOUND, 1);
	else
	{
		bool		ok = true;
		uint32		page = 0;
		int64		cached_before = extent_cached_pages(fd, ext);
		int64		cached_after;

		while (page < ext->npages)
		{
			uint32		run_start;

			if (page_kept(ext, page))
			{
				page++;
				continue;
			}
			run_start = page;
			while (page < ext->npages && !page_kept(ext, page))
				page++;
			ok &= drop_pages(fd, ext, run_start, page - run_start);
		}
		cached_after = extent_cached_pages(fd, ext);
		count_dropped(ext, cached_before, cached_after);
		if (ok && ext->retries < DROP_RETRIES && cached_after > ext->nkept)
		{
			ext->retries++;
			close(fd);
			return false;
		}
		pce_count(ok ? PCE_USTAT_EXTENTS_DROPPED : PCE_USTAT_DROP_ERRORS, 1);
		close(fd);
	}
	forget_extent(ext);
	return true;
}

/*
 * A scan folio: extend the file's newest extent, or start a new one.
 * Extents hold whole folios, because fadvise(DONTNEED) leaves alone a large
 * folio that the range covers only in part; so a folio larger than an
 * extent (large folios go up to 2 MiB) gets an extent of its own.
 */
static void
record_folio(const struct pce_folio_event *ev)
{
	FileKey		key = event_file(ev);
	TrackedFile *tf;
	bool		found;
	Extent	   *ext;
	uint32		max_pages = Min(EXTENT_MAX_PAGES, EXTENT_MAX_BYTES / page_size);

	tf = hash_search(tracked_files, &key, HASH_ENTER, &found);
	if (!found)
		dlist_init(&tf->extents);
	else if (!dlist_is_empty(&tf->extents))
	{
		ext = dlist_tail_element(Extent, file_node, &tf->extents);
		if (ext->start + ext->npages == ev->index &&
			ext->npages + ev->nr_pages <= max_pages)
		{
			ext->npages += ev->nr_pages;
			tracked_pages += ev->nr_pages;
			return;
		}
	}
	ext = MemoryContextAllocZero(evictor_cxt, sizeof(Extent));
	ext->file = key;
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
	FileKey		key = event_file(ev);
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
		record_folio(ev);
	pce_count(PCE_USTAT_RECORDS_READ, 1);
	return 0;
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
		ctl.keysize = sizeof(FileKey);
		ctl.entrysize = sizeof(TrackedFile);
		ctl.hcxt = evictor_cxt;
		tracked_files = hash_create("pg_cache_ext tracked files", 1024, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		ctl.entrysize = sizeof(FilePath);
		file_paths = hash_create("pg_cache_ext file paths", 4096, &ctl,
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
	rebuild_paths();
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

void
pce_evictor_poll(void)
{
	if (ring)
		ring_buffer__consume(ring);
}

/* Drop the oldest extents until within the settings' budget and age. */
void
pce_evictor_enforce(const PceSettings *settings)
{
	uint64		budget_pages = ((uint64) settings->scan_budget_mb * 1024 * 1024) / page_size;
	TimestampTz now = GetCurrentTimestamp();

	while (!dlist_is_empty(&extents))
	{
		Extent	   *oldest = dlist_head_element(Extent, node, &extents);
		bool		too_old = settings->scan_max_age_s > 0 &&
			TimestampDifferenceExceeds(oldest->born, now, settings->scan_max_age_s * 1000);

		if (tracked_pages <= budget_pages && !too_old)
			break;

		/*
		 * Pages still cached after the drop are being read right now: stop
		 * here rather than drop newer extents, which the reader has not
		 * reached yet; the next round tries again.
		 */
		if (!drop_extent(oldest))
			break;
	}
	publish_gauges();
}

/* Forget every extent without dropping anything (mode off, mechanism gone). */
void
pce_evictor_forget_all(void)
{
	while (!dlist_is_empty(&extents))
		forget_extent(dlist_head_element(Extent, node, &extents));
	publish_gauges();
}
