/*-------------------------------------------------------------------------
 *
 * cachestat.c
 *		How much of an open file is in the page cache: the cachestat(2)
 *		system call's ABI (Linux 6.5+, not in every libc's headers yet), and
 *		mincore() where the kernel lacks it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/mman.h>
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

/*
 * cachestat(2) on len bytes of fd from off (len 0: to the end of the file):
 * how many of those pages are cached, dirty, under writeback.  False where
 * the kernel lacks the call (before 6.5).
 */
bool
pce_cachestat(int fd, uint64 off, uint64 len, PceCacheStat *out)
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
 * Cached and dirty pages of one open file: cachestat(2) where the kernel has
 * it (6.5+), else mincore() on a mapping (no dirty count then).
 */
bool
pce_file_residency(int fd, off_t size, uint64 *cached, uint64 *dirty, const char **method)
{
	PceCacheStat cs;
	long		pagesz = sysconf(_SC_PAGESIZE);

	if (pce_cachestat(fd, 0, 0, &cs))
	{
		*cached += cs.cached * pagesz;
		*dirty += cs.dirty * pagesz;
		*method = "cachestat";
		return true;
	}
	if (size > 0)
	{
		size_t		npages = (size + pagesz - 1) / pagesz;
		unsigned char *vec;
		void	   *addr = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);

		if (addr == MAP_FAILED)
			return false;
		vec = palloc(npages);
		if (mincore(addr, size, vec) == 0)
			for (size_t i = 0; i < npages; i++)
				if (vec[i] & 1)
					*cached += pagesz;
		pfree(vec);
		munmap(addr, size);
	}
	*method = "mincore";
	return true;
}
