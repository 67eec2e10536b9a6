/*-------------------------------------------------------------------------
 *
 * shared_buffers.c
 *		Scan pages PostgreSQL has yet to write back: the stock-kernel evictor
 *		leaves a file page cached while its block is dirty in shared_buffers,
 *		or writes the block before it drops the page.
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
 * are within an eighth of the budget, which counts them.  Beyond that the
 * evictor writes such blocks itself, as the bgwriter does, into the page
 * while it is still cached, and drops the page once it is written back:
 * with the disk's 8 MB read-ahead (2 MB folios) and a scan pruning every
 * fifth block after a bulk UPDATE, every folio held such blocks, and the
 * other writers' stalls came back (up to 92 ms a read, bench/siblings.sh).
 *
 * The look-up is the buffer manager's own: the buffer mapping table under
 * its partition lock, shared, and the buffer's state word read while the
 * lock keeps the buffer from being given to another block.  The background
 * worker has the shared memory of every backend (BGWORKER_SHMEM_ACCESS);
 * to write a buffer it pins it (ReadRecentBuffer, no read if the buffer
 * was given to another block meanwhile), locks its content shared and has
 * the buffer manager write it (FlushOneBuffer), as the bgwriter does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/lwlock.h"
#include "storage/smgr.h"

#include "compat.h"
#include "pg_cache_ext_int.h"

/* pce_write_dirty_blocks wrote since pce_close_written_files */
static bool wrote_blocks = false;

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

/* file's relation fork, as the buffer manager names it */
static PceRelFileLocator
file_locator(const PceRelationFile *file)
{
	return pce_rel_file_locator(file->spcoid, file->dboid, file->relfilenode);
}

/*
 * The buffer (buffer id) that holds block of the relation fork of file if
 * it is dirty in shared_buffers, else -1.
 */
static int
dirty_buffer(const PceRelationFile *file, BlockNumber block)
{
	BufferTag	tag;
	uint32		hash;
	LWLock	   *partition_lock;
	int			buf_id;
	bool		dirty = false;

	pce_init_buffer_tag(&tag, file_locator(file), fork_number(file->fork), block);
	hash = BufTableHashCode(&tag);
	partition_lock = BufMappingPartitionLock(hash);
	LWLockAcquire(partition_lock, LW_SHARED);
	buf_id = BufTableLookup(&tag, hash);
	if (buf_id >= 0)
		dirty = (pg_atomic_read_u32(&GetBufferDescriptor(buf_id)->state) & BM_DIRTY) != 0;
	LWLockRelease(partition_lock);
	return dirty ? buf_id : -1;
}

/*
 * The blocks OS page page of file (a segment of a relation fork) is part
 * of: with 4 kB pages, a block is two pages; with 64 kB pages, a page is
 * eight blocks.
 */
static void
page_blocks(const PceRelationFile *file, uint64 page, long page_size,
			BlockNumber *first, BlockNumber *last)
{
	uint64		first_byte = (uint64) file->segno * RELSEG_SIZE * BLCKSZ + page * (uint64) page_size;

	*first = (BlockNumber) (first_byte / BLCKSZ);
	*last = (BlockNumber) ((first_byte + page_size - 1) / BLCKSZ);
}

/*
 * Is OS page page of file (NULL for a file that is no relation's) part of
 * a block that is dirty in shared_buffers?
 */
bool
pce_page_dirty_in_shared_buffers(const PceRelationFile *file, uint64 page, long page_size)
{
	BlockNumber first,
				last;

	if (file == NULL)
		return false;
	page_blocks(file, page, page_size, &first, &last);
	for (BlockNumber block = first; block <= last; block++)
		if (dirty_buffer(file, block) >= 0)
			return true;
	return false;
}

/*
 * Write the blocks of OS page page of file that are dirty in shared_buffers,
 * as the bgwriter writes a buffer (FlushOneBuffer: the WAL up to the
 * block's LSN first), before a drop that cannot leave the page for
 * PostgreSQL's own write.  Written now, into the page while it is cached,
 * the block is a plain copy; the drop then waits for the page's writeback.
 * A buffer that was given to another block meanwhile is not pinned
 * (ReadRecentBuffer), and one already written is not written again.
 */
void
pce_write_dirty_blocks(const PceRelationFile *file, uint64 page, long page_size)
{
	BlockNumber first,
				last;

	if (file == NULL)
		return;
	page_blocks(file, page, page_size, &first, &last);
	for (BlockNumber block = first; block <= last; block++)
	{
		int			buf_id = dirty_buffer(file, block);

		if (buf_id < 0 ||
			!ReadRecentBuffer(file_locator(file), fork_number(file->fork), block, buf_id + 1))
			continue;
		LockBuffer(buf_id + 1, BUFFER_LOCK_SHARE);
		FlushOneBuffer(buf_id + 1);
		UnlockReleaseBuffer(buf_id + 1);
		wrote_blocks = true;
	}
}

/*
 * Close the relation files the writes opened (the storage manager keeps
 * them open), now and then: a dropped relation's space is freed only once
 * the last descriptor of its files is closed.  The checkpointer and the
 * bgwriter close theirs after each checkpoint.
 */
void
pce_close_written_files(void)
{
	if (!wrote_blocks)
		return;
	smgrreleaseall();
	wrote_blocks = false;
}
