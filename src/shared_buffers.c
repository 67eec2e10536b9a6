/*-------------------------------------------------------------------------
 *
 * shared_buffers.c
 *		Scan pages PostgreSQL has yet to write back: the stock-kernel evictor
 *		leaves a file page cached while its block is dirty in shared_buffers.
 *
 * Scans dirty the blocks they read (hint bits, VACUUM's pruning and
 * freezing), in shared_buffers; whoever evicts such a buffer later writes
 * it (an OLTP backend that needs a buffer, the bgwriter, the checkpointer).
 * When the evictor had dropped the file's page meanwhile, that write makes
 * the page anew, and it can stall: the writer copies the block from shared
 * memory it has not touched yet, the copy faults part-way, the kernel
 * keeps only what it copied in a page that is not up to date, and reads
 * the rest of the file block from disk, under the file's inode lock.
 * Beside four scans on a throttled disk that read took 61 ms, and the
 * other OLTP backend queued on the lock behind it (bench/siblings.sh,
 * perf's sched_switch and block_bio_queue of the OLTP backends).  Left
 * cached and up to date, the page takes the write as a copy.  So the
 * evictor (evictor.c, page_left) leaves such pages, and drops them once
 * PostgreSQL wrote them and the kernel wrote them back, or after 60 s of
 * waiting.  A page is left with the whole large folio it is in (fadvise
 * drops whole folios only), so they are left only while the pages waiting
 * are within half of the budget, which counts them.
 *
 * The look-up is the buffer manager's own: the buffer mapping table under
 * its partition lock, shared, and the buffer's state word read while the
 * lock keeps the buffer from being given to another block.  The background
 * worker has the shared memory of every backend (BGWORKER_SHMEM_ACCESS).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/bufmgr.h"
#include "storage/lwlock.h"

#include "compat.h"
#include "pg_cache_ext_int.h"

/* the fork of a relation file's name suffix ('m' for none) */
static ForkNumber
fork_number(char fork)
{
	switch (fork)
	{
		case 'f':
			return FSM_FORKNUM;
		case 'v':
			return VISIBILITYMAP_FORKNUM;
		case 'i':
			return INIT_FORKNUM;
		default:
			return MAIN_FORKNUM;
	}
}

/* Is block of the relation fork of file in shared_buffers and dirty? */
static bool
block_dirty(const PceRelationFile *file, BlockNumber block)
{
	BufferTag	tag;
	uint32		hash;
	LWLock	   *partition_lock;
	int			buf_id;
	bool		dirty = false;

	pce_init_buffer_tag(&tag, file->spcoid, file->dboid, file->relfilenode,
						fork_number(file->fork), block);
	hash = BufTableHashCode(&tag);
	partition_lock = BufMappingPartitionLock(hash);
	LWLockAcquire(partition_lock, LW_SHARED);
	buf_id = BufTableLookup(&tag, hash);
	if (buf_id >= 0)
		dirty = (pg_atomic_read_u32(&GetBufferDescriptor(buf_id)->state) & BM_DIRTY) != 0;
	LWLockRelease(partition_lock);
	return dirty;
}

/*
 * Is OS page page of file (a segment of a relation fork; NULL for a file
 * that is no relation's) part of a block that is dirty in shared_buffers?
 * (With 4 kB pages, a block is two pages; with 64 kB pages, a page is
 * eight blocks.)
 */
bool
pce_page_dirty_in_shared_buffers(const PceRelationFile *file, uint64 page, long page_size)
{
	uint64		first_byte;

	if (file == NULL)
		return false;
	first_byte = (uint64) file->segno * RELSEG_SIZE * BLCKSZ + page * (uint64) page_size;
	for (uint64 byte = first_byte; byte < first_byte + page_size; byte += BLCKSZ)
		if (block_dirty(file, (BlockNumber) (byte / BLCKSZ)))
			return true;
	return false;
}
