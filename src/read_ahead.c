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
 * a while).  On btrfs, stat() names a subvolume's anonymous device, which
 * no block device in sysfs is: the file system's own read-ahead is found
 * by its UUID (btrfs_read_ahead_kb; it is at least 4 MB, so with the
 * default assumed the evictor dropped the read-ahead of a scan behind
 * another before the scan read it: it read the table from disk 3.3 times,
 * t/023).  Other devices sysfs does not describe (an overlay, NFS) are
 * taken to have the kernel's default.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <linux/btrfs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

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

/*
 * The read-ahead of the btrfs file system fd is on: that of its own
 * backing device, which sysfs links from the file system's directory,
 * named by its UUID (/sys/fs/btrfs/<fsid>/bdi, Linux 5.9+).  The UUID is
 * what BTRFS_IOC_FS_INFO, which any reader of a file may ask, says.
 * False if fd is not on btrfs.
 */
static bool
btrfs_read_ahead_kb(int fd, uint64 *kb)
{
	struct btrfs_ioctl_fs_info_args info;
	struct statfs fs;
	const uint8 *u = info.fsid;
	char		path[MAXPGPATH];

	memset(&info, 0, sizeof(info));
	if (fstatfs(fd, &fs) != 0 || fs.f_type != BTRFS_SUPER_MAGIC ||
		ioctl(fd, BTRFS_IOC_FS_INFO, &info) != 0)
		return false;
	snprintf(path, sizeof(path),
			 "/sys/fs/btrfs/%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			 "%02x%02x%02x%02x%02x%02x/bdi/read_ahead_kb",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7],
			 u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	return read_kb(path, kb);
}

/*
 * The read_ahead_kb of file's device: the disk's, or its partition's
 * disk's, or its btrfs file system's, else the kernel's default.  False if
 * that cannot be known now: the device is none of sysfs's and the file,
 * which would say what it is, is gone.
 */
static bool
device_read_ahead_kb(const PceFileKey *file, uint64 *kb)
{
	char		path[MAXPGPATH];
	int			fd;

	*kb = DEFAULT_READ_AHEAD_KB;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/read_ahead_kb",
			 major(file->dev), minor(file->dev));
	if (read_kb(path, kb))
		return true;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/read_ahead_kb",
			 major(file->dev), minor(file->dev));
	if (read_kb(path, kb))
		return true;
	fd = pce_file_index_open(file);
	if (fd < 0)
		return false;
	(void) btrfs_read_ahead_kb(fd, kb);
	close(fd);
	return true;
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
		uint64		kb;
		bool		known = device_read_ahead_kb(file, &kb);

		/* unknown: the default until a file of the device says */
		if (known || fresh)
			d->read_ahead_kb = kb;
		d->dev = file->dev;
		d->read_at = known ? now : 0;
	}
	return 2 * d->read_ahead_kb * 1024 / page_size;
}
