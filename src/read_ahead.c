/*-------------------------------------------------------------------------
 *
 * read_ahead.c
 *		The read-ahead of the disk a file is on: how far ahead of a reader
 *		the kernel brings pages in, which the evictor leaves to the reader.
 *
 * A sequential reader has up to two read-ahead windows of the disk's
 * read_ahead_kb ahead of it (the one it reads in, and the next, started
 * asynchronously when it reaches the first).  With the kernel's default of
 * 128 kB that is 256 kB; a virtio disk with a large optimal I/O size, or
 * an md or LVM stripe, has several MB.  Pages dropped within that distance
 * of their reader are read again, and the reader's next read-ahead starts
 * small again (small folios: more records for the worker), so the evictor
 * keeps the young pages within it first (evictor.c, read_next).
 *
 * The value is read from sysfs for the file's device (a partition's is its
 * disk's), and read again every READ_AHEAD_REREAD_MS: an administrator may
 * change it on a live server (the kernel copies it into a file when the
 * file is opened, so files a backend already has open keep the old one for
 * a while).  A device sysfs does not describe (an overlay, a btrfs
 * anonymous device, NFS) is taken to have the kernel's default, though
 * btrfs reads at least 4 MB ahead: there the evictor keeps less of a
 * reader's read-ahead first than it could.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/sysmacros.h>

#include "utils/timestamp.h"

#include "pg_cache_ext_int.h"

/* the kernel's default read_ahead_kb (VM_READAHEAD_PAGES) */
#define DEFAULT_READ_AHEAD_KB	128
/* how often a device's read_ahead_kb is read again */
#define READ_AHEAD_REREAD_MS	10000
/* devices remembered (a cluster's tablespaces are on a few) */
#define MAX_DEVICES				8

typedef struct DeviceReadAhead
{
	dev_t		dev;
	uint64		read_ahead_kb;
	TimestampTz read_at;
} DeviceReadAhead;

static DeviceReadAhead devices[MAX_DEVICES];
static int	ndevices = 0;

/* read_ahead_kb from one sysfs file; false if absent or unreadable */
static bool
read_kb(const char *path, uint64 *kb)
{
	FILE	   *f = fopen(path, "r");
	unsigned long long value;
	bool		ok;

	if (!f)
		return false;
	ok = fscanf(f, "%llu", &value) == 1;
	fclose(f);
	if (ok)
		*kb = value;
	return ok;
}

/* The read_ahead_kb of dev: the disk's, or its partition's disk's. */
static uint64
device_read_ahead_kb(dev_t dev)
{
	char		path[MAXPGPATH];
	uint64		kb = DEFAULT_READ_AHEAD_KB;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/read_ahead_kb",
			 major(dev), minor(dev));
	if (read_kb(path, &kb))
		return kb;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/read_ahead_kb",
			 major(dev), minor(dev));
	(void) read_kb(path, &kb);
	return kb;
}

/* The slot of dev: its own, else a free one, else the one read longest ago. */
static DeviceReadAhead *
device_slot(dev_t dev, bool *fresh)
{
	DeviceReadAhead *oldest = &devices[0];

	for (int i = 0; i < ndevices; i++)
	{
		if (devices[i].dev == dev)
		{
			*fresh = false;
			return &devices[i];
		}
		if (devices[i].read_at < oldest->read_at)
			oldest = &devices[i];
	}
	*fresh = true;
	return ndevices < MAX_DEVICES ? &devices[ndevices++] : oldest;
}

/*
 * How many pages ahead of a sequential reader of file the kernel may
 * have brought in: two read-ahead windows of its disk.
 */
uint64
pce_read_ahead_reach_pages(const PceFileKey *file, long page_size)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		fresh;
	DeviceReadAhead *d = device_slot(file->dev, &fresh);

	if (fresh || TimestampDifferenceExceeds(d->read_at, now, READ_AHEAD_REREAD_MS))
	{
		d->dev = file->dev;
		d->read_ahead_kb = device_read_ahead_kb(file->dev);
		d->read_at = now;
	}
	return 2 * d->read_ahead_kb * 1024 / page_size;
}
