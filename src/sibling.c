/*-------------------------------------------------------------------------
 *
 * sibling.c
 *		Sibling scanners share what one of them read: the stock-kernel
 *		evictor keeps a scan page while a live marked reader of the same
 *		relation has yet to read it.
 *
 * Two count(*) of one table (synchronized scans: the second joins the
 * first where it is, and both then move together, one reading from disk
 * and the other from the cache moments later), a pg_dump's COPY behind a
 * count(*), or a VACUUM beside them: each page one of them brings in is
 * read by the others next.  Dropping it as soon as the budget is exceeded
 * makes the others read it again from disk.
 *
 * Where each marked process reads is recorded by the tracker's read hook
 * (the mm_filemap_get_pages tracepoint, Linux 6.10+, or fentry on
 * filemap_read before it: in the reading process, also for reads served
 * from the cache) in the pinned map scan_positions:
 * the file and the last page of its latest read, keyed like scan_pids.
 * No PostgreSQL structure is needed, so this holds for every kind of
 * marked reader (a SeqScan, COPY TO, VACUUM, the parallel workers of one
 * scan, each with its own position), and whether or not they are
 * synchronized.
 *
 * Once per round, pce_sibling_refresh() reads the positions of the
 * processes whose mark is live (the same start time; positions of
 * processes no longer marked are removed, positions older than
 * POSITION_MAX_AGE_MS ignored) and turns each into a page number within
 * its relation fork (segment * pages per segment + page), kept per relation
 * fork it reads (a few: VACUUM reads the heap, the visibility map and the
 * indexes in turn).  Where a marked statement started reading a file is
 * recorded by the tracker (start_index: the first page of its first read
 * of the file in that statement; a worker round would see it later): a
 * synchronized scan starts in the middle, reads to the end, and wraps
 * around to its start.  A reader at pos that started at first has yet to
 * read the pages after pos, and, before it wrapped, those before first.
 *
 * The evictor (evictor.c) asks pce_sibling_use() before it drops an
 * extent over the budget.  Within the budget, it keeps the extents that a
 * reader still needs and another has read (the furthest page any reader
 * got, kept per relation fork while it has live readers): with two readers
 * or more those a reader needs soonest (pages_away), else the oldest; and
 * the pages beyond where any reader got, the front reader's read-ahead.
 * It drops first those no live reader needs any more (they are the
 * oldest), then those it does not keep.  The budget holds all of them:
 * the memory scans share is the memory the administrator gives them.
 * Once a reader wrapped, or for pages before where a reader started, all
 * counts as reached: such pages are a sibling's, but the young ones just
 * ahead of a reader that is reading are its read-ahead all the same, and
 * the evictor keeps them first (pce_sibling_reads_soon, evictor.c's
 * read_next).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "pg_cache_ext_int.h"

/*
 * a reader that read within this time is reading: the pages just ahead of
 * it are its read-ahead (pce_sibling_reads_soon)
 */
#define READING_MS				1000
/* readers followed at once (more are ignored: their pages are not held) */
#define MAX_READERS				128
/*
 * a position not updated for this long is a reader that stopped reading (a
 * cursor left open): what it would need is left to the budget again
 */
#define POSITION_MAX_AGE_MS		60000

/*
 * Where a reader is in one relation fork.  A reader may move between
 * files (VACUUM reads the heap, its visibility map and its indexes in
 * turn): each keeps its own position and start.
 */
typedef struct ReaderPlace
{
	PceRelationFile rel;		/* segno 0: positions are relation-wide */
	uint64		pos;			/* last page read, in the relation fork */
	uint64		first;			/* where this statement started reading it */
	uint64		used;			/* refresh count when last updated (0: free) */
	uint64		read_ns;		/* when it last read there (CLOCK_MONOTONIC) */
} ReaderPlace;

#define PLACES_PER_READER		4

typedef struct SiblingReader
{
	__u32		pid;
	uint64		start_ticks;
	uint64		marked_at_us;	/* which statement of that process */
	struct pce_scan_mark mark;	/* its mark: why, which relation (lap_start.c) */
	ReaderPlace places[PLACES_PER_READER];
	uint64		read_ns;		/* when it last read, anywhere (CLOCK_MONOTONIC) */
	uint64		window_pages;	/* one read-ahead window of the disk it read last */
	bool		seen;			/* found by the latest refresh */
} SiblingReader;

/*
 * How far the readers of a relation fork got: the furthest page one of them
 * read while it had live readers (kept after that reader ended, as long as
 * another reads on).  Pages up to it some reader has read.
 */
typedef struct RelationReach
{
	PceRelationFile rel;
	uint64		reach;			/* the furthest page read */
	bool		wrapped;		/* a reader wrapped around: all of it was read */
	bool		seen;			/* a live reader of it in the latest refresh */
} RelationReach;

#define MAX_REACHES				(MAX_READERS * PLACES_PER_READER)

static bool same_relation(const PceRelationFile *a, const PceRelationFile *b);

static RelationReach reaches[MAX_REACHES];
static int	nreaches = 0;

static SiblingReader readers[MAX_READERS];
static int	nreaders = 0;
static int	positions_fd = -1;
static uint64 positions_generation = 0;
static uint64 refreshes = 0;
static uint64 refreshed_ns = 0;		/* when, CLOCK_MONOTONIC */

/* The place of r in relation fork rel: its own, else a free one, else the oldest. */
static ReaderPlace *
reader_place(SiblingReader *r, const PceRelationFile *rel, bool *fresh)
{
	ReaderPlace *oldest = &r->places[0];

	for (int i = 0; i < PLACES_PER_READER; i++)
	{
		ReaderPlace *p = &r->places[i];

		if (p->used != 0 && same_relation(&p->rel, rel))
		{
			*fresh = false;
			return p;
		}
		if (p->used < oldest->used)
			oldest = p;
	}
	*fresh = true;
	return oldest;
}

/* the OS page size, asked once */
static long
os_page_size(void)
{
	static long size = 0;

	if (size == 0)
		size = sysconf(_SC_PAGESIZE);
	return size;
}

/* OS pages of one segment of a relation fork (1 GB by default) */
static uint64
pages_per_segment(void)
{
	static uint64 pages = 0;

	if (pages == 0)
		pages = (uint64) RELSEG_SIZE * BLCKSZ / (uint64) os_page_size();
	return pages;
}

static bool
same_relation(const PceRelationFile *a, const PceRelationFile *b)
{
	return a->dir == b->dir && a->relfilenode == b->relfilenode && a->fork == b->fork;
}

/* The pinned positions map, (re)opened with the maps; -1 if absent. */
static int
positions_map(void)
{
	if (positions_fd >= 0 && positions_generation == pce_maps_generation())
		return positions_fd;
	if (positions_fd >= 0)
		close(positions_fd);
	positions_fd = pce_pin_open(PCE_PIN_SCAN_POSITIONS);
	positions_generation = pce_maps_generation();
	return positions_fd;
}

static SiblingReader *
reader_slot(__u32 pid, uint64 start_ticks)
{
	for (int i = 0; i < nreaders; i++)
		if (readers[i].pid == pid && readers[i].start_ticks == start_ticks)
			return &readers[i];
	if (nreaders >= MAX_READERS)
		return NULL;
	memset(&readers[nreaders], 0, sizeof(SiblingReader));
	readers[nreaders].pid = pid;
	readers[nreaders].start_ticks = start_ticks;
	return &readers[nreaders++];
}

/* The reach kept for rel; NULL if none */
static RelationReach *
reach_of(const PceRelationFile *rel)
{
	for (int i = 0; i < nreaches; i++)
		if (same_relation(&reaches[i].rel, rel))
			return &reaches[i];
	return NULL;
}

/* A live reader of rel read up to page pos (all of it, once it wrapped). */
static void
note_reach(const PceRelationFile *rel, uint64 pos, bool wrapped)
{
	RelationReach *r = reach_of(rel);

	if (!r)
	{
		if (nreaches >= MAX_REACHES)
			return;
		r = &reaches[nreaches++];
		r->rel = *rel;
		r->reach = 0;
		r->wrapped = false;
	}
	/* the furthest real page, also once wrapped: place_distance's end */
	r->reach = Max(r->reach, pos);
	r->wrapped |= wrapped;
	r->seen = true;
}

/* Forget the reach of relation forks no live reader reads any more. */
static void
forget_unread_reaches(void)
{
	int			kept = 0;

	for (int i = 0; i < nreaches; i++)
		if (reaches[i].seen)
		{
			reaches[i].seen = false;
			reaches[kept++] = reaches[i];
		}
	nreaches = kept;
}

/* Take one position of the map in; false if it is to be removed. */
static bool
take_position(int fd, __u32 pid, uint64 now_ns)
{
	struct pce_scan_position pos;
	struct pce_scan_mark mark;
	PceFileKey	key;
	PceRelationFile rel;
	SiblingReader *r;
	ReaderPlace *place;
	bool		fresh;
	uint64		page,
				start;

	if (bpf_map_lookup_elem(fd, &pid, &pos) != 0)
		return true;			/* gone meanwhile */
	if (!pce_map_read_mark(pid, &mark) || mark.proc_start_ticks != pos.proc_start_ticks)
		return false;			/* its process no longer scans */
	if (pos.marked_at_us != mark.marked_at_us)
		return true;			/* a statement before: this one has yet to read */
	if (now_ns > pos.updated_ns &&
		now_ns - pos.updated_ns > (uint64) POSITION_MAX_AGE_MS * 1000000)
		return true;
	key = pce_file_key_from_kernel(pos.dev, pos.ino, pos.generation);
	if (!pce_file_index_lookup(&key, pos.index, false) || !pce_file_index_relation(&key, &rel))
		return true;			/* not a relation file (WAL, a temporary file) */
	page = rel.segno * pages_per_segment() + pos.index;
	start = rel.segno * pages_per_segment() + pos.start_index;
	rel.segno = 0;
	r = reader_slot(pid, pos.proc_start_ticks);
	if (!r)
		return true;
	if (r->marked_at_us != mark.marked_at_us)
	{
		/* a new statement: it starts afresh everywhere */
		memset(r->places, 0, sizeof(r->places));
		r->marked_at_us = mark.marked_at_us;
	}
	r->mark = mark;
	place = reader_place(r, &rel, &fresh);
	if (fresh)
	{
		/* where it started reading this file (the tracker keeps it) */
		place->rel = rel;
		place->first = Min(page, start);
	}
	place->pos = page;
	place->used = refreshes;
	place->read_ns = pos.updated_ns;
	note_reach(&rel, page, place->pos < place->first);
	r->read_ns = pos.updated_ns;
	r->window_pages = pce_read_ahead_reach_pages(&key, os_page_size()) / 2;
	r->seen = true;
	return true;
}

/*
 * Read the positions of the live marked readers (once per evictor round);
 * remove those of processes no longer marked.
 */
void
pce_sibling_refresh(void)
{
	int			fd = positions_map();
	__u32		prev,
				next;
	__u32	   *prevp = NULL;
	struct timespec ts;
	uint64		now_ns;
	int			kept = 0;

	refreshes++;
	for (int i = 0; i < nreaders; i++)
		readers[i].seen = false;
	if (fd >= 0)
	{
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now_ns = (uint64) ts.tv_sec * 1000000000 + ts.tv_nsec;
		refreshed_ns = now_ns;
		/*
		 * A removal sends the walk back to the start (from prev, or from
		 * the first key when prev was removed meanwhile): bounded, so that
		 * positions churning cannot keep the worker here.
		 */
		for (int steps = 0; steps < 2 * PCE_MAX_SCAN_PIDS &&
			 bpf_map_get_next_key(fd, prevp, &next) == 0; steps++)
		{
			if (!take_position(fd, next, now_ns))
			{
				(void) bpf_map_delete_elem(fd, &next);
				continue;		/* the walk goes on from prev */
			}
			prev = next;
			prevp = &prev;
		}
	}
	for (int i = 0; i < nreaders; i++)
		if (readers[i].seen)
			readers[kept++] = readers[i];
	nreaders = kept;
	forget_unread_reaches();
}

/* Has a reader at p yet to read some page of [from, to) of its relation fork? */
static bool
place_needs(const ReaderPlace *p, uint64 from, uint64 to)
{
	bool		wrapped = p->pos < p->first;

	/* ahead of it: after its position, and, before it wrapped, before its start */
	if (wrapped)
		return to - 1 > p->pos && from < p->first;
	return to - 1 > p->pos || from < p->first;
}

/* Has some reader of rel (live, or gone while others read on) read up to page last? */
static bool
reached(const PceRelationFile *rel, uint64 last)
{
	RelationReach *r = reach_of(rel);

	return r && (r->wrapped || last <= r->reach);
}

/*
 * Pages the reader at p reads before it gets to page from (which it needs):
 * after its position, directly; before its start (it has yet to wrap),
 * after the rest of the relation, whose end is taken as the furthest page
 * any reader got (a real page, also once one wrapped: the pages before a
 * reader's start are then as far as the rest of the relation, not
 * endlessly).
 */
static uint64
place_distance(const ReaderPlace *p, const PceRelationFile *rel, uint64 from)
{
	RelationReach *r = reach_of(rel);
	uint64		end = Max(r ? r->reach : 0, p->pos);

	if (from > p->pos)
		return from - p->pos;
	if (p->pos < p->first)
		return 0;				/* wrapped, and from is within what it reads */
	return from < p->first ? end - p->pos + from : 0;
}

/*
 * Page start of file (the relation fork and segment file_rel) as a page of
 * its relation fork (*rel, segment 0) that readers are followed in: *from.
 * False if none is, or the file is no relation file (file_rel NULL).
 */
static bool
followed_relation_page(const PceRelationFile *file_rel, uint64 start, PceRelationFile *rel,
					   uint64 *from)
{
	if (nreaders == 0 || file_rel == NULL)
		return false;
	*rel = *file_rel;
	*from = rel->segno * pages_per_segment() + start;
	rel->segno = 0;
	return true;
}

/*
 * What are the pages start .. start + npages - 1 of file to the live
 * marked readers of its relation fork: read by all that will read them
 * (done), yet to be read by one and read by another (for a sibling), or
 * beyond where any reader got: the front reader's own read-ahead, which it
 * reads next (dropping it would make it read the pages again).  *pages_away
 * (unless NULL) says how soon: the fewest pages a reader that needs them
 * reads first.
 */
PceScanPagesUse
pce_sibling_use(const PceRelationFile *file, uint64 start, uint32 npages, uint64 *pages_away)
{
	PceRelationFile rel;
	uint64		from;
	bool		needed = false;

	if (pages_away)
		*pages_away = PG_UINT64_MAX;
	if (!followed_relation_page(file, start, &rel, &from))
		return PCE_PAGES_DONE;
	for (int i = 0; i < nreaders; i++)
		for (int k = 0; k < PLACES_PER_READER; k++)
		{
			const ReaderPlace *p = &readers[i].places[k];

			if (p->used == 0 || !same_relation(&p->rel, &rel) ||
				!place_needs(p, from, from + npages))
				continue;
			needed = true;
			if (pages_away)
				*pages_away = Min(*pages_away, place_distance(p, &rel, from));
		}
	if (!needed)
		return PCE_PAGES_DONE;
	return reached(&rel, from + npages - 1) ? PCE_PAGES_FOR_SIBLING : PCE_PAGES_READ_NEXT;
}

/*
 * Are pages start .. start + npages - 1 of file within reach_pages ahead of
 * a reader that is reading (it read within READING_MS of the latest
 * refresh)?  Then they are its read-ahead, or a sibling's pages it gets to
 * in a moment.  A reader that stopped (a cursor, a client that waits) has
 * nothing in flight.
 */
bool
pce_sibling_reads_soon(const PceRelationFile *file, uint64 start, uint32 npages,
					   uint64 reach_pages)
{
	PceRelationFile rel;
	uint64		from;

	if (!followed_relation_page(file, start, &rel, &from))
		return false;
	for (int i = 0; i < nreaders; i++)
		for (int k = 0; k < PLACES_PER_READER; k++)
		{
			const ReaderPlace *p = &readers[i].places[k];

			if (p->used != 0 && same_relation(&p->rel, &rel) &&
				refreshed_ns - Min(p->read_ns, refreshed_ns) < (uint64) READING_MS * 1000000 &&
				place_needs(p, from, from + npages) &&
				place_distance(p, &rel, from) <= reach_pages)
				return true;
		}
	return false;
}

/*
 * Where the live marked COPY TO statements read the main fork of a
 * relation (their heap, or its TOAST table), for lap_start.c: up to max
 * places into out; returns how many.
 */
int
pce_sibling_copy_places(PceCopyBlock *out, int max)
{
	int			n = 0;
	struct timespec ts;

	/* none once the evictor stopped refreshing (another mechanism) */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if ((uint64) ts.tv_sec * 1000000000 + ts.tv_nsec > refreshed_ns + (uint64) READING_MS * 1000000)
		return 0;
	for (int i = 0; i < nreaders; i++)
	{
		const SiblingReader *r = &readers[i];

		if (r->mark.reason != PCE_REASON_COPY_TO)
			continue;
		for (int j = 0; j < PLACES_PER_READER && n < max; j++)
		{
			const ReaderPlace *p = &r->places[j];

			if (p->used == 0 || p->rel.fork != 'm')
				continue;
			out[n].pid = (int) r->pid;
			out[n].procno = -1;	/* the caller's to find */
			out[n].dboid = r->mark.dboid;
			out[n].relid = r->mark.relid;
			out[n].spcoid = p->rel.spcoid;
			out[n].relfilenode = p->rel.relfilenode;
			out[n].block = (BlockNumber) (p->pos * (uint64) sysconf(_SC_PAGESIZE) / BLCKSZ);
			n++;
		}
	}
	return n;
}

/*
 * Pages the readers that are reading (within READING_MS of the latest
 * refresh) can bring in at once, before the evictor reads their records:
 * one read-ahead window each.  The kernel inserts a window's folios
 * together, when its reader gets to the window before it: with 8 MB
 * read-ahead, four readers of one table put 18 MB into the cache within
 * 100 ms, and the table went 16 MB over its budget (bench/siblings.sh,
 * FINE=1).  The evictor's drops leave room for them (drop_target).
 */
uint64
pce_sibling_read_ahead_burst_pages(void)
{
	uint64		pages = 0;

	for (int i = 0; i < nreaders; i++)
		if (refreshed_ns - Min(readers[i].read_ns, refreshed_ns) < (uint64) READING_MS * 1000000)
			pages += readers[i].window_pages;
	return pages;
}

/* Live readers followed now (the evictor ranks what they need only for two or more). */
int
pce_sibling_readers(void)
{
	return nreaders;
}
