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
 * that call (it starts their writeback instead), so nothing is lost.
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

typedef struct FileKey
{
	dev_t		dev;
	ino_t		ino;
} FileKey;

typedef struct Extent
{
	dlist_node	node;			/* in the arrival-order list */
	FileKey		file;
	uint64		start;			/* first page */
	uint32		npages;
	TimestampTz born;
} Extent;

/* Per tracked file: its newest extent, to coalesce sequential records. */
typedef struct TrackedFile
{
	FileKey		key;
	Extent	   *newest;
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
static uint64 tracked_pages = 0;
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

static void
forget_extent(Extent *ext)
{
	TrackedFile *tf = hash_search(tracked_files, &ext->file, HASH_FIND, NULL);

	if (tf && tf->newest == ext)
		hash_search(tracked_files, &ext->file, HASH_REMOVE, NULL);
	dlist_delete(&ext->node);
	tracked_pages -= ext->npages;
	tracked_extents--;
	pfree(ext);
}

static void
drop_extent(Extent *ext)
{
	int			fd = open_tracked_file(&ext->file);

	if (fd < 0)
		pce_count(PCE_USTAT_FILES_NOT_FOUND, 1);
	else
	{
		off_t		off = (off_t) ext->start * page_size;
		off_t		len = (off_t) ext->npages * page_size;

		if (posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED) == 0)
		{
			pce_count(PCE_USTAT_EXTENTS_DROPPED, 1);
			pce_count(PCE_USTAT_BYTES_DROPPED, len);
		}
		else
			pce_count(PCE_USTAT_DROP_ERRORS, 1);
		close(fd);
	}
	forget_extent(ext);
}

static void
record_folio(const struct pce_folio_event *ev)
{
	FileKey		key;
	TrackedFile *tf;
	bool		found;
	Extent	   *ext;
	uint32		max_pages = EXTENT_MAX_BYTES / page_size;

	memset(&key, 0, sizeof(key));
	/* the kernel's internal dev_t is major << 20 | minor */
	key.dev = makedev(ev->dev >> 20, ev->dev & 0xfffff);
	key.ino = ev->ino;

	tf = hash_search(tracked_files, &key, HASH_ENTER, &found);
	if (found && tf->newest &&
		tf->newest->start + tf->newest->npages == ev->index &&
		tf->newest->npages + ev->nr_pages <= max_pages)
	{
		tf->newest->npages += ev->nr_pages;
		tracked_pages += ev->nr_pages;
		return;
	}
	ext = MemoryContextAlloc(evictor_cxt, sizeof(Extent));
	ext->file = key;
	ext->start = ev->index;
	ext->npages = ev->nr_pages;
	ext->born = GetCurrentTimestamp();
	dlist_push_tail(&extents, &ext->node);
	tf->newest = ext;
	tracked_pages += ev->nr_pages;
	tracked_extents++;
}

static int
handle_event(void *ctx, void *data, size_t size)
{
	if (size >= sizeof(struct pce_folio_event))
	{
		record_folio((const struct pce_folio_event *) data);
		pce_count(PCE_USTAT_EVENTS_READ, 1);
	}
	return 0;
}

/* ---- interface for the worker ---- */

bool
pce_evictor_start(void)
{
	char		path[MAXPGPATH];
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

	snprintf(path, sizeof(path), "%s/%s", pce_pin_dir(), PCE_PIN_FOLIO_EVENTS);
	ring_map_fd = bpf_obj_get(path);
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

/* Drop the oldest extents until within budget and age. */
void
pce_evictor_enforce(void)
{
	uint64		budget_pages = ((uint64) pce_scan_budget_mb * 1024 * 1024) / page_size;
	TimestampTz now = GetCurrentTimestamp();

	while (!dlist_is_empty(&extents))
	{
		Extent	   *oldest = dlist_head_element(Extent, node, &extents);
		bool		too_old = pce_scan_max_age_s > 0 &&
			TimestampDifferenceExceeds(oldest->born, now, pce_scan_max_age_s * 1000);

		if (tracked_pages <= budget_pages && !too_old)
			break;
		drop_extent(oldest);
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
