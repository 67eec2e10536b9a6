/*-------------------------------------------------------------------------
 *
 * wal.c
 *		WAL that no process will read: the worker drops a segment's pages
 *		from the page cache once the WAL flush has passed it.
 *
 * Scans write WAL: the first scan after a bulk change prunes the blocks it
 * reads, and each block's first change after a checkpoint logs a full-page
 * image (about 200 MB of WAL per GB scanned where every fifth block was
 * updated, bench/siblings.sh); VACUUM writes more.  PostgreSQL keeps WAL
 * in the page cache for the processes that read it next (WAL senders, the
 * archiver, logical decoding, a standby's startup process) and drops a
 * closed segment itself only at wal_level = minimal, where none can.
 * Where none does now (no WAL sender runs, archiving is off, no replication
 * slot exists, no WAL summarizer runs (17+), the server is not in
 * recovery), the worker drops each segment once the WAL flush is past its
 * end: its pages are written then (with fsync = off, the drop starts their
 * writeback and the next call drops them).  Beside the scans of
 * bench/siblings.sh, 70 MB of such WAL took the hot set's tail (98.7-98.9%
 * of it cached); dropped, the hot set stayed cached.  A reader that starts
 * later reads the WAL it needs from disk, as after a restart.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "replication/slot.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

#include "compat.h"
#include "pg_cache_ext_int.h"

/* segments dropped at most per call (after a worker long busy elsewhere) */
#define WAL_DROP_SEGMENTS_MAX	64

/* calls that find pages of a segment still cached before it is let go */
#define WAL_DROP_TRIES			8

/* the oldest segment not yet dropped (0: none yet), and how often tried */
static XLogSegNo next_segment = 0;
static int	next_segment_tries = 0;

static bool
wal_sender_running(void)
{
	if (WalSndCtl == NULL)
		return false;
	for (int i = 0; i < max_wal_senders; i++)
	{
		WalSnd	   *walsnd = &WalSndCtl->walsnds[i];
		pid_t		pid;

		SpinLockAcquire(&walsnd->mutex);
		pid = walsnd->pid;
		SpinLockRelease(&walsnd->mutex);
		if (pid != 0)
			return true;
	}
	return false;
}

static bool
replication_slot_exists(void)
{
	bool		found = false;

	if (ReplicationSlotCtl == NULL)
		return false;
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (int i = 0; i < max_replication_slots && !found; i++)
		found = ReplicationSlotCtl->replication_slots[i].in_use;
	LWLockRelease(ReplicationSlotControlLock);
	return found;
}

/* May some process read the WAL written now, later?  (A base backup runs in a WAL sender.) */
static bool
wal_has_readers(void)
{
	return RecoveryInProgress() || XLogArchivingActive() || pce_wal_summarized() ||
		wal_sender_running() || replication_slot_exists();
}

/*
 * fadvise(DONTNEED) segment segno of timeline tli.  True if none of its
 * pages is left cached (or the segment is gone): pages not yet written
 * back (fsync = off; a writeback under way) stay, and the fadvise started
 * their writeback.
 */
static bool
drop_segment(TimeLineID tli, XLogSegNo segno)
{
	char		path[MAXPGPATH];
	char		name[MAXFNAMELEN];
	PceCacheStat left;
	bool		dropped;
	int			fd;

	XLogFileName(name, tli, segno, wal_segment_size);
	snprintf(path, sizeof(path), XLOGDIR "/%s", name);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return true;			/* recycled or removed meanwhile */
	(void) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	dropped = !pce_cachestat_known(fd, pce_on_overlay(fd), 0, wal_segment_size, &left) ||
		left.cached == 0;
	close(fd);
	return dropped;
}

/*
 * Drop the segments the WAL flush passed since the last call, when no
 * process reads WAL (wal_has_readers); what was written while one may read
 * it is left to it.  A segment with pages left is tried again at the next
 * call, WAL_DROP_TRIES times at most.
 */
void
pce_drop_unread_wal(bool enabled)
{
	TimeLineID	tli;
	XLogSegNo	flushed_segno;

	if (!enabled || wal_has_readers())
	{
		next_segment = 0;
		return;
	}
	XLByteToSeg(GetFlushRecPtr(&tli), flushed_segno, wal_segment_size);
	if (next_segment == 0)
		next_segment = flushed_segno;	/* from now on */
	if (flushed_segno > WAL_DROP_SEGMENTS_MAX)
		next_segment = Max(next_segment, flushed_segno - WAL_DROP_SEGMENTS_MAX);
	while (next_segment < flushed_segno)
	{
		if (!drop_segment(tli, next_segment) && ++next_segment_tries < WAL_DROP_TRIES)
			break;				/* its writeback is under way: again next time */
		next_segment++;
		next_segment_tries = 0;
	}
}
