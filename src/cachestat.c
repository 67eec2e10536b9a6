/*-------------------------------------------------------------------------
 *
 * cachestat.c
 *		How much of an open file is in the page cache: the cachestat(2)
 *		system call's ABI (Linux 6.5+, not in every libc's headers yet), and
 *		mincore() where the kernel lacks it.
 *
 * cachestat(2) counts the pages of the open file's own mapping.  An
 * overlayfs file has none: its pages are the real file's below, so
 * cachestat reports none of them cached.  A mapping of it is the real
 * file's (overlayfs hands mmap to it), so mincore() counts them; there is
 * no dirty or writeback count that way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pg_cache_ext_int.h"

/* the system call and its structures, as include/uapi/linux/mman.h has them */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

struct pce_cachestat_range
{
	uint64		off;
	uint64		len;
};

struct pce_cachestat
{
	uint64		nr_cache;
	uint64		nr_dirty;
	uint64		nr_writeback;
	uint64		nr_evicted;
	uint64		nr_recently_evicted;
};

/* Is fd an overlayfs file, whose pages cachestat(2) cannot see? */
bool
pce_on_overlay(int fd)
{
	struct statfs fs;

	return fstatfs(fd, &fs) == 0 && fs.f_type == OVERLAYFS_SUPER_MAGIC;
}

/*
 * How many pages of len bytes of fd from off are cached, by mincore() on a
 * mapping of them: the pages the mapping's file has, which for an overlay
 * file are the real file's.  (mincore counts a page only once it is read
 * in.)  A mapping starts at a page: off is rounded down, as cachestat(2)
 * counts the pages a range touches.
 */
static bool
mincore_cached(int fd, uint64 off, uint64 len, uint64 *cached)
{
	long		pagesz = sysconf(_SC_PAGESIZE);
	size_t		npages;
	unsigned char *vec;
	void	   *addr;
	bool		ok;

	*cached = 0;
	if (len == 0)
		return true;
	len += off % pagesz;
	off -= off % pagesz;
	npages = (len + pagesz - 1) / pagesz;
	addr = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t) off);
	if (addr == MAP_FAILED)
		return false;
	vec = palloc(npages);
	ok = mincore(addr, len, vec) == 0;
	for (size_t i = 0; ok && i < npages; i++)
		*cached += vec[i] & 1;
	pfree(vec);
	munmap(addr, len);
	return ok;
}

/* cachestat(2) of len bytes of fd from off (len 0: to the end of the file) */
static bool
cachestat_pages(int fd, uint64 off, uint64 len, PceCacheStat *out)
{
	struct pce_cachestat_range range = {off, len};
	struct pce_cachestat cs;

	if (syscall(__NR_cachestat, fd, &range, &cs, 0) != 0)
		return false;
	out->cached = cs.nr_cache;
	out->dirty = cs.nr_dirty;
	out->writeback = cs.nr_writeback;
	return true;
}

/*
 * How many pages of len bytes of fd from off (len 0: to the end of the
 * file) are cached, dirty, under writeback: cachestat(2), or mincore() on
 * an overlay or where the kernel lacks cachestat (before 6.5: Debian 12's
 * 6.1); out->counts_dirty says whether dirty and writeback were counted.
 */
bool
pce_cachestat(int fd, uint64 off, uint64 len, PceCacheStat *out)
{
	return pce_cachestat_known(fd, pce_on_overlay(fd), off, len, out);
}

/* The same, for a file whose caller knows whether it is on an overlay. */
bool
pce_cachestat_known(int fd, bool on_overlay, uint64 off, uint64 len, PceCacheStat *out)
{
	struct stat st;

	out->counts_dirty = true;
	if (!on_overlay && cachestat_pages(fd, off, len, out))
		return true;
	if (len == 0)
		len = fstat(fd, &st) == 0 && st.st_size > off ? st.st_size - off : 0;
	out->dirty = out->writeback = 0;
	out->counts_dirty = false;
	return mincore_cached(fd, off, len, &out->cached);
}

/*
 * Cached and dirty pages of one open file of size bytes: cachestat(2)
 * where the kernel has it (6.5+) and the file is on no overlay, else
 * mincore() on a mapping (no dirty count then).
 */
bool
pce_file_residency(int fd, off_t size, uint64 *cached, uint64 *dirty, const char **method)
{
	PceCacheStat cs;
	long		pagesz = sysconf(_SC_PAGESIZE);
	uint64		pages;

	if (!pce_on_overlay(fd) && cachestat_pages(fd, 0, 0, &cs))
	{
		*cached += cs.cached * pagesz;
		*dirty += cs.dirty * pagesz;
		*method = "cachestat";
		return true;
	}
	if (!mincore_cached(fd, 0, size > 0 ? size : 0, &pages))
		return false;
	*cached += pages * pagesz;
	*method = "mincore";
	return true;
}
