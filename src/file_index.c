/*-------------------------------------------------------------------------
 *
 * file_index.c
 *		Which files the stock-kernel evictor tracks, and how it finds them:
 *		an index from (device, inode) to the files of the cluster, kept
 *		current without walking the whole tree on every miss.
 *
 * The one rule of what is tracked, by who read the pages:
 *
 *	- for every scan, the files of relations (pce_is_relation_file_name),
 *	  named <relfilenode>[_fsm|_vm|_init][.<segment>], in a database's
 *	  directory (base/<db>, global, pg_tblspc/<oid>/<version>/<db>).  Not
 *	  the server's other files: the temporary files of sorts and hashes
 *	  (pgsql_tmp) are read back by the same query that wrote them, WAL is
 *	  read by WAL senders and archivers next, and temporary relations
 *	  (t<backend>_<relfilenode>) live and die with one session; the
 *	  kernel's LRU is the right place for what the server reads of them.
 *	- for an external tree (pg_cache_ext_run: a backup's tar, rsync,
 *	  pgBackRest), also the other regular files of the data directory: WAL
 *	  segments (pg_wal), the SLRUs (pg_xact, pg_multixact, ...), the files
 *	  at its top and the non-relation files of the database directories
 *	  (CLUSTER_FILE_DIRS).  A backup copying them reads them once; the
 *	  server that needs its WAL next still has the pages it had cached (a
 *	  page already cached is never recorded, so never dropped).  Never the
 *	  temporary files (pgsql_tmp), which are in none of these directories.
 *
 * Records of any other file are ignored.
 *
 * The index holds one entry per such file, with whether it is a relation
 * file.  It is built from readdir()
 * alone (the directory entry's inode number, no stat per file), per
 * database directory, and a directory is read again only when its mtime or
 * ctime changed (a file was created or removed in it), or when it changed
 * within a second of the last reading (a change in the same clock tick
 * would not move the timestamp).  A miss therefore costs one stat per
 * database directory, at most every REFRESH_MIN_MS, and a readdir of the
 * directories that changed; the worker also looks whenever it keeps up
 * with the ring (pce_file_index_keep_current), so that a directory is
 * mostly read before a scan's records need it.  Keys that miss are remembered (a negative
 * cache) until the index changes, so a temporary file's stream of records
 * costs one hash lookup each.
 *
 * An inode number may be reused by another file once its file is gone.  The
 * tracker records the inode's generation (i_generation), which changes on
 * reuse; pce_file_index_open() checks it with FS_IOC_GETVERSION where the
 * file system has one.
 *
 * On overlayfs (a container's own file system, when the data directory is
 * not on a volume), stat() and readdir() name a file by the overlay's
 * anonymous device, while its pages are the real file's below, which the
 * tracker names by the real file system's device.  The inode numbers are
 * the real ones where all layers are on one file system, as Docker's
 * overlay2 and containerd lay them out (overlayfs's "samefs"; with layers
 * on several file systems it changes them, and the files are not found).
 * Neither stat() nor /proc tells user space the real device (/proc's maps
 * name the overlay's too, since 6.8), so the index learns it: the first
 * record whose inode number is one of an overlay's files, and whose page
 * that file has cached, names that overlay's real device
 * (learn_overlay_device).  Until then its files are not found.  (A file
 * copied up from a lower layer is named by its lower inode's number, which
 * the tracker does not see: a relation file of an image's data directory
 * is not found until PostgreSQL rewrites it.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "catalog/pg_tablespace_d.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_cache_ext_int.h"

/* as include/uapi/linux/fs.h has it (the kernel writes an int) */
#ifndef FS_IOC_GETVERSION
#define FS_IOC_GETVERSION	_IOR('v', 1, long)
#endif

/* a miss looks at the directories at most this often */
#define REFRESH_MIN_MS		100
/* a miss that may be an overlay's file: the wait for its first page, the retries */
#define OVERLAY_WAIT_MS		20
#define OVERLAY_RETRY_MS	5
/* the negative cache is emptied when it grows beyond this */
#define NEGATIVE_MAX		65536
/* longest relation file name: 10 digits, "_init", ".", 10 digits */
#define REL_NAME_MAX		32
/* overlay file systems the data directory and its tablespaces are on */
#define OVERLAYS_MAX		8

/*
 * The directories, below the data directory, of the files that only
 * external trees' reads are tracked in (besides the non-relation files of
 * the database directories); none of them holds pgsql_tmp.
 */
static const char *const CLUSTER_FILE_DIRS[] = {
	".", "pg_wal", "pg_xact", "pg_multixact/offsets", "pg_multixact/members",
	"pg_subtrans", "pg_commit_ts", "pg_serial", "pg_snapshots", "pg_logical",
	"pg_logical/snapshots", "pg_logical/mappings", "pg_replslot", "pg_stat",
};

/* A directory and the files it held at its last reading. */
typedef struct IndexedDir
{
	dlist_node	node;			/* in indexed_dirs */
	char		relpath[MAXPGPATH]; /* relative to the data directory */
	dev_t		dev;
	struct timespec mtime;
	struct timespec ctime;
	bool		reread;			/* changed near its last reading: read again */
	bool		seen;			/* found by the latest refresh */
	bool		is_db_dir;		/* a database's directory (relation files) */
	dlist_head	files;
} IndexedDir;

typedef struct InodeKey
{
	dev_t		dev;
	ino_t		ino;
} InodeKey;

typedef struct IndexedFile
{
	InodeKey	key;
	IndexedDir *dir;
	dlist_node	dir_node;		/* in dir->files */
	bool		is_relation;	/* tracked for every scan, not only external */
	char		name[REL_NAME_MAX];
} IndexedFile;

typedef struct NegativeEntry
{
	PceFileKey	key;
	uint64		epoch;			/* index_epoch when it missed */
	bool		overlay_file;	/* its inode number is an unlearned overlay's file's */
	uint64		page;			/* the page of its first record */
	TimestampTz missed_at;		/* when it last missed */
} NegativeEntry;

/* An overlay: the device stat() reports, and the one the tracker records. */
typedef struct OverlayDevice
{
	dev_t		overlay;
	dev_t		real;			/* 0 until learned */
} OverlayDevice;

static MemoryContext index_cxt = NULL;
static OverlayDevice overlays[OVERLAYS_MAX];
static int	noverlays = 0;
static dlist_head indexed_dirs = DLIST_STATIC_INIT(indexed_dirs);
static HTAB *indexed_files = NULL;
static HTAB *negative = NULL;
static uint64 index_epoch = 1;	/* bumped whenever a directory is read */
static TimestampTz refreshed_at = 0;

static void refresh_index(void);

/* ---- the rule ---- */

static const char *
skip_digits(const char *p)
{
	if (*p < '1' || *p > '9')	/* an OID: no leading zero, not empty */
		return NULL;
	while (*p >= '0' && *p <= '9')
		p++;
	return p;
}

/*
 * The one rule of which files are scan-tracked: a relation's fork or
 * segment, <relfilenode>[_fsm|_vm|_init][.<segment>].  Temporary files
 * (pgsql_tmp*), temporary relations (t3_16384), WAL segments and anything
 * else are not.
 */
bool
pce_is_relation_file_name(const char *name)
{
	const char *p = skip_digits(name);

	if (!p || strlen(name) >= REL_NAME_MAX)
		return false;
	if (strncmp(p, "_fsm", 4) == 0 || strncmp(p, "_init", 5) == 0)
		p += p[1] == 'f' ? 4 : 5;
	else if (strncmp(p, "_vm", 3) == 0)
		p += 3;
	if (*p == '.')
		p = skip_digits(p + 1);
	return p && *p == '\0';
}

/*
 * Is the directory entry de of dir tracked, and for every scan (a relation
 * file) or only for external trees?  The rule at the top of this file.
 */
static bool
tracked_entry(const IndexedDir *dir, const struct dirent *de, bool *is_relation)
{
	*is_relation = dir->is_db_dir && pce_is_relation_file_name(de->d_name);
	if (*is_relation)
		return true;
	return de->d_name[0] != '.' && strlen(de->d_name) < REL_NAME_MAX &&
		(de->d_type == DT_REG || de->d_type == DT_UNKNOWN);
}

/* A database's directory name: an OID. */
static bool
is_oid_name(const char *name)
{
	const char *p = skip_digits(name);

	return p && *p == '\0';
}

/* ---- overlay file systems ---- */

/* The device the tracker records for files stat() names on st_dev. */
static dev_t
tracked_dev(dev_t st_dev)
{
	for (int i = 0; i < noverlays; i++)
		if (overlays[i].overlay == st_dev && overlays[i].real != 0)
			return overlays[i].real;
	return st_dev;
}

/* Remember that the directory path, on device st_dev, is on an overlay. */
static void
note_overlay(const char *path, dev_t st_dev)
{
	struct statfs fs;

	for (int i = 0; i < noverlays; i++)
		if (overlays[i].overlay == st_dev)
			return;
	if (noverlays == OVERLAYS_MAX || statfs(path, &fs) != 0 ||
		fs.f_type != OVERLAYFS_SUPER_MAGIC)
		return;
	overlays[noverlays].overlay = st_dev;
	overlays[noverlays].real = 0;
	noverlays++;
}

/* The file of an overlay not learned yet whose inode number is ino, or NULL. */
static IndexedFile *
unlearned_overlay_file(ino_t ino, OverlayDevice **overlay)
{
	for (int i = 0; i < noverlays; i++)
	{
		InodeKey	ikey;
		IndexedFile *f;

		if (overlays[i].real != 0)
			continue;
		memset(&ikey, 0, sizeof(ikey));
		ikey.dev = overlays[i].overlay;
		ikey.ino = ino;
		if ((f = hash_search(indexed_files, &ikey, HASH_FIND, NULL)) != NULL)
		{
			*overlay = &overlays[i];
			return f;
		}
	}
	return NULL;
}

/* Open the indexed file f for reading (by its path: -1 if that is gone). */
static int
open_indexed_file(const IndexedFile *f)
{
	char		path[MAXPGPATH];

	snprintf(path, sizeof(path), "%s/%s/%s", DataDir, f->dir->relpath, f->name);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/*
 * Is page of f cached, as seen through the overlay (pce_cachestat counts an
 * overlay file's pages with mincore(), which counts a page once it is read
 * in)?  A record comes as its page is being read in: wait at most wait_ms
 * for it.
 */
static bool
overlay_page_cached(const IndexedFile *f, uint64 page, int wait_ms)
{
	long		pagesz = sysconf(_SC_PAGESIZE);
	struct stat st;
	PceCacheStat cs;
	bool		cached = false;
	int			fd;

	if ((fd = open_indexed_file(f)) < 0)
		return false;
	if (fstat(fd, &st) == 0 && page < (uint64) (st.st_size + pagesz - 1) / pagesz)
	{
		for (int waited = 0;; waited++)
		{
			cached = pce_cachestat(fd, page * pagesz, pagesz, &cs) && cs.cached > 0;
			if (cached || waited >= wait_ms)
				break;
			pg_usleep(1000L);
		}
	}
	close(fd);
	return cached;
}

/*
 * key missed, for a record of its page page: is it a file of an overlay
 * whose real device is not known yet?  Then key's device is that overlay's
 * real one (see the top of this file), and its directories are read again,
 * keyed by it.  A file of another file system (read by a marked COPY FROM,
 * or an external tree) may share its inode number with one of the
 * overlay's, so the overlay's file must also have that page cached: the
 * record says it was just read in.  (Waited for at the first record, once
 * per file: the records that come before the overlay is learned are lost,
 * and their pages stay.)
 */
static bool
learn_overlay_device(const PceFileKey *key, uint64 page, int wait_ms)
{
	OverlayDevice *overlay;
	IndexedFile *f = unlearned_overlay_file(key->ino, &overlay);
	dlist_iter	iter;

	if (!f || !overlay_page_cached(f, page, wait_ms))
		return false;
	overlay->real = key->dev;
	ereport(LOG,
			(errmsg("pg_cache_ext: the overlay file system on device %u:%u keeps its files on device %u:%u",
					major(overlay->overlay), minor(overlay->overlay),
					major(key->dev), minor(key->dev)),
			 errdetail("Learned from inode %lu, the file \"%s/%s\".",
					   (unsigned long) key->ino, f->dir->relpath, f->name)));
	dlist_foreach(iter, &indexed_dirs)
	{
		IndexedDir *dir = dlist_container(IndexedDir, node, iter.cur);

		if (dir->dev == overlay->overlay)
			dir->reread = true;
	}
	refresh_index();
	return true;
}

/* ---- reading directories ---- */

static void
forget_dir_files(IndexedDir *dir)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &dir->files)
	{
		IndexedFile *f = dlist_container(IndexedFile, dir_node, iter.cur);

		dlist_delete(&f->dir_node);
		hash_search(indexed_files, &f->key, HASH_REMOVE, NULL);
	}
}

static void
read_dir(IndexedDir *dir, const struct stat *st)
{
	char		path[MAXPGPATH];
	DIR		   *d;
	struct dirent *de;
	struct timespec now;

	forget_dir_files(dir);
	dir->dev = st->st_dev;
	dir->mtime = st->st_mtim;
	dir->ctime = st->st_ctim;
	clock_gettime(CLOCK_REALTIME, &now);
	/* changed within the last second: a later change may keep this mtime */
	dir->reread = now.tv_sec - Max(st->st_mtim.tv_sec, st->st_ctim.tv_sec) <= 1;
	index_epoch++;
	snprintf(path, sizeof(path), "%s/%s", DataDir, dir->relpath);
	note_overlay(path, dir->dev);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) != NULL)
	{
		InodeKey	key;
		IndexedFile *f;
		bool		found;
		bool		is_relation;

		if (!tracked_entry(dir, de, &is_relation))
			continue;
		memset(&key, 0, sizeof(key));
		key.dev = tracked_dev(dir->dev);
		key.ino = de->d_ino;
		f = hash_search(indexed_files, &key, HASH_ENTER, &found);
		if (found)
			dlist_delete(&f->dir_node);
		f->dir = dir;
		f->is_relation = is_relation;
		strlcpy(f->name, de->d_name, sizeof(f->name));
		dlist_push_tail(&dir->files, &f->dir_node);
	}
	closedir(d);
}

static bool
same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* A directory: read it if it is new or changed since last time. */
static void
visit_dir(const char *relpath, bool is_db_dir)
{
	char		path[MAXPGPATH];
	struct stat st;
	dlist_iter	iter;
	IndexedDir *dir = NULL;

	snprintf(path, sizeof(path), "%s/%s", DataDir, relpath);
	/* stat, not lstat: pg_tblspc holds symlinks to the tablespaces */
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return;
	dlist_foreach(iter, &indexed_dirs)
	{
		IndexedDir *d = dlist_container(IndexedDir, node, iter.cur);

		if (strcmp(d->relpath, relpath) == 0)
			dir = d;
	}
	if (!dir)
	{
		dir = MemoryContextAllocZero(index_cxt, sizeof(IndexedDir));
		strlcpy(dir->relpath, relpath, sizeof(dir->relpath));
		dir->is_db_dir = is_db_dir;
		dlist_init(&dir->files);
		dlist_push_tail(&indexed_dirs, &dir->node);
		dir->reread = true;
	}
	dir->seen = true;
	if (dir->reread || dir->dev != st.st_dev ||
		!same_time(&dir->mtime, &st.st_mtim) || !same_time(&dir->ctime, &st.st_ctim))
		read_dir(dir, &st);
}

/*
 * Visit the database directories below reldir, a container of them
 * (depth 0) or of containers (depth > 0: pg_tblspc/<oid>/<version>).
 */
static void
visit_containers(const char *reldir, int depth)
{
	char		path[MAXPGPATH];
	DIR		   *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "%s/%s", DataDir, reldir);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) != NULL)
	{
		char		relpath[MAXPGPATH];

		if (de->d_name[0] == '.')
			continue;
		snprintf(relpath, sizeof(relpath), "%s/%s", reldir, de->d_name);
		if (depth > 0)
			visit_containers(relpath, depth - 1);
		else if (is_oid_name(de->d_name))
			visit_dir(relpath, true);
	}
	closedir(d);
}

/* Bring the index up to date with the directories that changed. */
static void
refresh_index(void)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &indexed_dirs)
		dlist_container(IndexedDir, node, iter.cur)->seen = false;
	visit_dir("global", true);
	visit_containers("base", 0);
	visit_containers("pg_tblspc", 2);
	for (int i = 0; i < lengthof(CLUSTER_FILE_DIRS); i++)
		visit_dir(CLUSTER_FILE_DIRS[i], false);
	dlist_foreach_modify(iter, &indexed_dirs)
	{
		IndexedDir *dir = dlist_container(IndexedDir, node, iter.cur);

		if (dir->seen)
			continue;
		forget_dir_files(dir);	/* a dropped database or tablespace */
		dlist_delete(&dir->node);
		pfree(dir);
		index_epoch++;
	}
	refreshed_at = GetCurrentTimestamp();
}

/* ---- interface for the evictor ---- */

/* Changes whenever a directory is read or forgotten (what the index names) */
uint64
pce_file_index_epoch(void)
{
	return index_epoch;
}

void
pce_file_index_init(void)
{
	HASHCTL		ctl;

	if (index_cxt)
		return;
	index_cxt = AllocSetContextCreate(TopMemoryContext, "pg_cache_ext file index",
									  ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(InodeKey);
	ctl.entrysize = sizeof(IndexedFile);
	ctl.hcxt = index_cxt;
	indexed_files = hash_create("pg_cache_ext relation files", 4096, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.keysize = sizeof(PceFileKey);
	ctl.entrysize = sizeof(NegativeEntry);
	negative = hash_create("pg_cache_ext untracked files", 1024, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	refresh_index();
}

static IndexedFile *
index_find(const PceFileKey *key)
{
	InodeKey	ikey;

	memset(&ikey, 0, sizeof(ikey));
	ikey.dev = key->dev;
	ikey.ino = key->ino;
	return hash_search(indexed_files, &ikey, HASH_FIND, NULL);
}

static bool
refresh_due(void)
{
	return TimestampDifferenceExceeds(refreshed_at, GetCurrentTimestamp(), REFRESH_MIN_MS);
}

/* Remember a key that names no tracked file, and say so once. */
static void
remember_miss(const PceFileKey *key, uint64 page)
{
	OverlayDevice *overlay;
	NegativeEntry *neg;
	bool		found;

	if (hash_get_num_entries(negative) >= NEGATIVE_MAX)
	{
		HASH_SEQ_STATUS seq;

		hash_seq_init(&seq, negative);
		while ((neg = hash_seq_search(&seq)) != NULL)
			hash_search(negative, &neg->key, HASH_REMOVE, NULL);
	}
	neg = hash_search(negative, key, HASH_ENTER, &found);
	neg->epoch = index_epoch;
	neg->overlay_file = unlearned_overlay_file(key->ino, &overlay) != NULL;
	neg->missed_at = GetCurrentTimestamp();
	if (found)
		return;
	neg->page = page;
	pce_count(PCE_USTAT_FILES_NOT_FOUND, 1);
	elog(DEBUG1, "pg_cache_ext: device %u:%u inode %lu (generation %u) is no tracked file of this cluster (a temporary file, a file outside the data directory, or gone): its pages are left to the kernel",
		 major(key->dev), minor(key->dev), (unsigned long) key->ino, key->generation);
}

/*
 * Is a key that missed worth looking up again?  Once the index changed, and
 * at most every REFRESH_MIN_MS.  One whose inode number is an unlearned
 * overlay's file's every OVERLAY_RETRY_MS (learn_overlay_device): the page
 * of its first record may have been read in slower than it waited, and the
 * scan's records until the overlay is learned are not tracked.
 */
static bool
retry_due(const NegativeEntry *neg)
{
	if (neg->overlay_file)
		return TimestampDifferenceExceeds(neg->missed_at, GetCurrentTimestamp(),
										  OVERLAY_RETRY_MS);
	return neg->epoch != index_epoch && refresh_due();
}

/*
 * Is key a file of this cluster tracked for this reader: a relation file,
 * or (for an external tree, external) any file of the index?  Looks at the
 * directories that changed when it is not known yet, and learns an
 * overlay's device from it (page: the page the record names); remembers
 * the ones that are not.
 */
bool
pce_file_index_lookup(const PceFileKey *key, uint64 page, bool external)
{
	NegativeEntry *neg;
	IndexedFile *f = index_find(key);

	if (f)
		return external || f->is_relation;
	neg = hash_search(negative, key, HASH_FIND, NULL);
	if (neg && !retry_due(neg))
		return false;
	if (refresh_due())
		refresh_index();
	f = index_find(key);
	if (!f && learn_overlay_device(key, neg ? neg->page : page,
								   neg ? 0 : OVERLAY_WAIT_MS))
		f = index_find(key);
	if (f)
	{
		if (neg)
			hash_search(negative, key, HASH_REMOVE, NULL);
		return external || f->is_relation;
	}
	remember_miss(key, page);
	return false;
}

/*
 * The worker keeps up with the ring: bring the index up to date (as a miss
 * would, at most every REFRESH_MIN_MS), so that a directory that changed (a table made: its new
 * files) is read while the worker is idle, before a scan of the new table.
 * Read on a scan's first records instead, a database directory of 100,000
 * files took the worker away from the ring for about 180 ms here, while the
 * scan read 130 MB.
 */
void
pce_file_index_keep_current(void)
{
	if (indexed_files && refresh_due())
		refresh_index();
}

/* Does the open file carry the generation the tracker recorded? */
static bool
same_generation(int fd, uint32 generation)
{
	long		v = 0;

	if (generation == 0)		/* a tracker that does not record it */
		return true;
	if (ioctl(fd, FS_IOC_GETVERSION, &v) != 0)
		return true;			/* a file system without generations */
	return (uint32) v == generation;
}

/*
 * Open the tracked file of key for reading; -1 if it is gone (removed,
 * or its inode now belongs to another file).
 */
int
pce_file_index_open(const PceFileKey *key)
{
	for (int attempt = 0; attempt < 2; attempt++)
	{
		IndexedFile *f = index_find(key);

		if (f)
		{
			struct stat st;
			int			fd = open_indexed_file(f);

			if (fd >= 0 && fstat(fd, &st) == 0 &&
				tracked_dev(st.st_dev) == key->dev && st.st_ino == key->ino &&
				same_generation(fd, key->generation))
				return fd;
			if (fd >= 0)
				close(fd);
		}
		if (attempt > 0 || !refresh_due())
			break;
		refresh_index();
	}
	return -1;
}

/*
 * The tablespace and database of a database directory, from its path:
 * global, base/<db> or pg_tblspc/<spc>/<version>/<db>.
 */
static void
dir_oids(const IndexedDir *dir, Oid *spcoid, Oid *dboid)
{
	const char *last = strrchr(dir->relpath, '/');

	*dboid = last ? (Oid) strtoul(last + 1, NULL, 10) : InvalidOid;
	if (strncmp(dir->relpath, "pg_tblspc/", 10) == 0)
		*spcoid = (Oid) strtoul(dir->relpath + 10, NULL, 10);
	else if (strcmp(dir->relpath, "global") == 0)
		*spcoid = GLOBALTABLESPACE_OID;
	else
		*spcoid = DEFAULTTABLESPACE_OID;
}

/*
 * Which relation fork and segment is the file of key (sibling.c compares
 * scan positions by it)?  False if key is not in the index; the caller
 * knows whether it is a relation file (the index also names the other
 * files an external tree reads: their names parse as nonsense here).
 * Files of one relation fork have the same directory and relfilenode.
 */
bool
pce_file_index_relation(const PceFileKey *key, PceRelationFile *rf)
{
	IndexedFile *f = index_find(key);
	const char *p;
	char	   *end;

	if (!f)
		return false;
	rf->dir = f->dir;
	dir_oids(f->dir, &rf->spcoid, &rf->dboid);
	rf->relfilenode = (uint32) strtoul(f->name, &end, 10);
	rf->fork = *end == '_' ? end[1] : 'm';	/* 'f'sm, 'v'm, 'i'nit, 'm'ain */
	p = strchr(f->name, '.');
	rf->segno = p ? (uint32) strtoul(p + 1, NULL, 10) : 0;
	return true;
}

/* a file named as the kernel encodes it (major << 20 | minor) */
PceFileKey
pce_file_key_from_kernel(__u32 dev, __u64 ino, __u32 generation)
{
	PceFileKey	key;

	memset(&key, 0, sizeof(key));
	key.dev = makedev(dev >> 20, dev & 0xfffff);
	key.ino = ino;
	key.generation = generation;
	return key;
}
