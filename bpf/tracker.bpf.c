/*
 * tracker.bpf.c
 *		Stock-kernel mechanism: record the folios that scans bring into the
 *		page cache, and the ones among them that other tasks then use.
 *
 * On a kernel without cache_ext we cannot choose what the kernel evicts, but
 * we can see every folio as it is inserted into the page cache: the
 * mm_filemap_add_to_page_cache tracepoint fires in the context of the task
 * whose read caused the insertion (including its readahead).  When that
 * task reads for a marked process (the process itself, a thread of it, or
 * an I/O worker performing its I/O) from a file of the cluster's account
 * (file_reader_mark() in maps.bpf.h), we push (device as stat() reports
 * it, inode, generation, index, size) into a ring buffer.  The background
 * worker in PostgreSQL drains the ring, coalesces records into per-file
 * extents and drops the oldest extents with posix_fadvise(DONTNEED) once
 * the scans' pages exceed a budget.
 *
 * Pages that were already cached when the scan read them are never
 * inserted, so never recorded, so never dropped: the OLTP hot set that a
 * scan merely re-reads stays where it is.
 *
 * The other way round, a page a scan brought in may be exactly what the
 * OLTP load needs next (an analytical query over the table the OLTP load
 * uses).  The tracker remembers the scan's pages, and when a task that is
 * not itself scanning reads one of them, it sends a promotion record: the
 * evictor leaves those pages to the kernel's LRU, as the cache_ext policy
 * moves such a folio to its main list.  pg_cache_ext.promote_on_access
 * switches this off.
 *
 * Who read the page must be seen where the read happens.  The
 * mm_filemap_get_pages tracepoint (Linux 6.10+) fires in filemap_read(),
 * in the reading task, with the page range it asked for: there the tracker
 * remembers scan pages by (mapping, 64 KiB chunk) and promotes a chunk
 * read by an unmarked task.  Older kernels (Debian 12's 6.1) lack it; an
 * fentry program on filemap_read() itself sees the same reads, one per
 * read() call, where the kernel allows fentry (the loader tries both, in
 * the order of PCE_READ_HOOK_TABLE).  The kernel's own "in use" signal,
 * mm_lru_activate, cannot say who: folio_mark_accessed() queues the
 * activation in a per-CPU batch, and the tracepoint fires when somebody
 * drains it, often a scan in direct reclaim (then the OLTP touch is
 * ignored); a folio still in the per-CPU add batch is activated by
 * __lru_cache_activate_folio() without any tracepoint; and with MGLRU
 * nothing is activated at all.  It is used only where neither read hook
 * can be attached (the loader sets promote_by_read otherwise), keyed by
 * folio address.
 *
 * Insertions by unmarked tasks cost two hash lookups (scan_pids, and
 * scanned_mappings for the write-back rule below; one more when the server
 * reads through I/O workers: maps.bpf.h) and one per-CPU increment; an
 * activation costs one lookup in the scan-folio map; an unmarked read of a
 * file no scan brought pages of, three (scan_pids, scanned_mappings,
 * scan_chunk_files).
 *
 * Sibling scanners (src/sibling.c): where a marked process reads, the read
 * tracepoint also records its position (scan_positions: file and last
 * page, by PID), so that the evictor keeps a scan page until every live
 * marked reader of the same relation has passed it: a synchronized scan
 * following another, or pg_dump's COPY behind a count(*), reads it from
 * the cache instead of the disk.
 *
 * Pages that enter the cache on a scan's behalf: a scan dirties pages
 * (hint bits, VACUUM) that it does not write itself; the checkpointer,
 * the bgwriter or another backend writes them back later, and when the
 * evictor dropped the page meanwhile, that write inserts it again.  An
 * insertion by an unmarked task into a file a live marked process is
 * reading (scanned_mappings) is remembered (behalf_pending), and when the
 * same folio is then dirtied by the same task (tp_btf/writeback_dirty_folio:
 * the write path marks it dirty right after inserting it; a read never
 * does, and a later write-back of a page read in is another task's), it is
 * recorded as a scan page (folios_added_for_scan) and can be promoted as
 * any other.  An OLTP read of a scanned table thus stays the OLTP's.
 *
 * Readers outside the server (a backup's tar, rsync, pgBackRest) are marked
 * by pg_cache_ext_run with reason "external"; a program on process fork
 * hands their mark down to every child and thread they start, so the whole
 * tree is a scanner.  A fork by an unmarked task costs one hash lookup.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "maps.bpf.h"

char		LICENSE[] SEC("license") = "GPL";

/*
 * Set by the loader before loading: promote on reads (mm_filemap_get_pages
 * or fentry/filemap_read) rather than on activations (mm_lru_activate).
 */
const volatile bool promote_by_read = false;

/* Set by the loader: log2 of the page size (fentry/filemap_read's offsets, wakeup_flag) */
const volatile __u32 page_shift = 12;

/* pages per chunk of a file that a read promotes at once: 64 KiB */
#define CHUNK_SHIFT			4
/*
 * chunks of the largest folio (2 MiB), and chunks one read looks at (32
 * MiB: one call of filemap_get_pages() may return 31 large folios, and
 * reports only the range asked for; PostgreSQL reads 8 KiB to 128 KiB)
 */
#define FOLIO_MAX_CHUNKS	32
#define READ_MAX_CHUNKS		512

/* A scan's pages, as promote_by_read remembers them. */
struct scan_chunk
{
	__u64		mapping;		/* struct address_space * of the file */
	__u64		chunk;			/* page index >> CHUNK_SHIFT */
};

/* Folios inserted by scan PIDs, for the evictor in user space. */
struct
{
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, PCE_FOLIO_EVENTS_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			folio_events SEC(".maps");

/*
 * Folios that scans brought in and that are still cached: by address
 * (promotion on activation), or by chunk (struct scan_chunk, promotion on
 * read; the map holds both layouts' keys as 16 bytes).  Not pinned: it
 * lives as long as the tracker's programs, so after a loader rerun the
 * folios recorded before can still be dropped but no longer promoted.
 */
struct
{
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PCE_MAX_SCAN_FOLIOS);
	__type(key, struct scan_chunk);
	__type(value, __u8);
}			scan_folios SEC(".maps");

/*
 * The files (struct address_space *) that have chunks in scan_folios, so
 * that a read of any other file, nearly every unmarked read, costs one
 * lookup instead of one per 64 KiB chunk it asks for (a 1 MiB read: 16).
 * An entry is refreshed whenever a chunk of its file is remembered and is
 * never removed when the chunks go (that would need a count kept exact
 * through the LRU's own evictions): a file whose chunks are gone costs the
 * chunk loop again, and nothing else.  The capacity is scan_folios's, so
 * that the LRU lets go of a file only after the chunks remembered before
 * its last refresh.
 */
struct
{
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PCE_MAX_SCAN_FOLIOS);
	__type(key, __u64);
	__type(value, __u8);
}			scan_chunk_files SEC(".maps");

/* Where each marked process last read (pg_cache_ext.h), for the evictor. */
struct
{
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PCE_MAX_SCAN_PIDS);
	__type(key, __u32);
	__type(value, struct pce_scan_position);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			scan_positions SEC(".maps");

/*
 * Which marked processes read a file (struct address_space *): a few, so
 * that one ending (a count(*) done) does not hide another still reading
 * (a pg_dump behind it).
 */
#define PCE_READERS_PER_FILE	4

struct scan_reader
{
	__u32		pid;			/* key of its mark in scan_pids */
	__u32		reserved;
	__u64		proc_start_ticks;	/* of that mark */
};

struct scan_readers
{
	struct scan_reader r[PCE_READERS_PER_FILE];
};

#define PCE_MAX_SCANNED_FILES	4096
#define PCE_MAX_BEHALF_PENDING	65536

struct
{
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PCE_MAX_SCANNED_FILES);
	__type(key, __u64);
	__type(value, struct scan_readers);
}			scanned_mappings SEC(".maps");

/*
 * Folios (by address) an unmarked task inserted into a file a live scan
 * reads: recorded as the scan's if the same task dirties them next.
 */
struct
{
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PCE_MAX_BEHALF_PENDING);
	__type(key, __u64);
	__type(value, __u64);		/* the inserting task (pid_tgid) */
}			behalf_pending SEC(".maps");

/*
 * A large folio's first tail page as kernels 6.1 to 6.5 lay it out: its
 * order in a byte of its own.  From 6.6 on that byte is gone and the order
 * is the low byte of _flags_1; before 6.6 _flags_1 exists too, but it is
 * the tail page's flags, so reading it there gives a wrong order (seen as
 * large folios recorded as one page, and dropped partly).  Which layout the
 * running kernel has is a CO-RE field existence check, resolved by libbpf
 * against its BTF when the tracker is loaded.
 */
struct folio___pre_6_6
{
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

static __always_inline __u32
large_folio_order(struct folio *folio)
{
	if (bpf_core_field_exists(struct folio___pre_6_6, _folio_order))
		return BPF_CORE_READ((struct folio___pre_6_6 *) folio, _folio_order);
	if (bpf_core_field_exists(folio->_flags_1))
		return BPF_CORE_READ(folio, _flags_1) & 0xff;
	return 0;					/* a layout we do not know: one page */
}

/*
 * folio_nr_pages(): a large folio has PG_head in its flags.  The flags word
 * is the first word of a folio (and of a page) on every kernel, but its type
 * changed (unsigned long up to 6.17, a one-word struct since), and CO-RE
 * refuses a field whose type kind differs from the build machine's.  So read
 * the first word by address.
 */
static __always_inline __u32
folio_pages(struct folio *folio)
{
	unsigned long flags = 0;
	unsigned long head = 1UL << bpf_core_enum_value(enum pageflags, PG_head);

	bpf_probe_read_kernel(&flags, sizeof(flags), (void *) folio);
	if (!(flags & head))
		return 1;
	return 1U << large_folio_order(folio);
}

/*
 * The device a file's records name must be the one stat() reports, the only
 * one user space can match.  On most file systems that is the superblock's
 * s_dev; btrfs reports each subvolume's anonymous device instead
 * (btrfs_getattr: BTRFS_I(inode)->root->anon_dev), and inode numbers are
 * per subvolume, so s_dev would name no file there (and would not tell two
 * subvolumes' files apart).  struct btrfs_inode is found by CO-RE in the
 * kernel's BTF or, where btrfs is a module, in the module's when it is
 * loaded before the tracker; without it btrfs files keep s_dev and are not
 * dropped (the evictor counts them in files_not_found).
 */
#define BTRFS_SUPER_MAGIC	0x9123683E

struct btrfs_root___pce
{
	dev_t		anon_dev;
} __attribute__((preserve_access_index));

struct btrfs_inode___pce
{
	struct btrfs_root___pce *root;
	struct inode vfs_inode;
} __attribute__((preserve_access_index));

static __always_inline __u32
stat_dev(struct inode *host)
{
	if (bpf_core_type_exists(struct btrfs_inode___pce) &&
		BPF_CORE_READ(host, i_sb, s_magic) == BTRFS_SUPER_MAGIC)
	{
		struct btrfs_inode___pce *bi = (void *) ((char *) host -
			bpf_core_field_offset(struct btrfs_inode___pce, vfs_inode));
		__u32		anon_dev = BPF_CORE_READ(bi, root, anon_dev);

		if (anon_dev != 0)
			return anon_dev;
	}
	return BPF_CORE_READ(host, i_sb, s_dev);
}

/*
 * Pages of the records sent since the last forced wakeup of the worker.
 * Woken whenever it had emptied the ring (the default), the worker made a
 * round of every few records (150 rounds a second beside four scans,
 * bench/siblings.sh), and each round's drop ranks every tracked extent by
 * what the readers need next: it is woken once the records sent since
 * cover PCE_WAKEUP_BYTES (pg_cache_ext.h), and wakes every 100 ms
 * by itself for a slow reader's records (src/worker.c).  Updated without
 * atomics: CPUs that race wake it once too often or too seldom, and the
 * timer covers that.
 */
static __u64 pages_since_wakeup = 0;

static __always_inline __u64
wakeup_flag(__u32 nr_pages)
{
	pages_since_wakeup += nr_pages;
	if ((pages_since_wakeup << page_shift) < PCE_WAKEUP_BYTES)
		return BPF_RB_NO_WAKEUP;
	pages_since_wakeup = 0;
	return BPF_RB_FORCE_WAKEUP;
}

static __always_inline void
send_event(struct address_space *mapping, __u64 index, __u32 nr_pages,
		   enum pce_folio_event_kind kind)
{
	struct pce_folio_event *ev;
	struct inode *host;

	ev = bpf_ringbuf_reserve(&folio_events, sizeof(*ev), 0);
	if (!ev)
	{
		stat_inc(PCE_STAT_RECORDS_LOST);
		return;
	}
	host = BPF_CORE_READ(mapping, host);
	ev->ino = BPF_CORE_READ(host, i_ino);
	ev->dev = stat_dev(host);
	ev->generation = BPF_CORE_READ(host, i_generation);
	ev->index = index;
	ev->nr_pages = nr_pages;
	ev->kind = kind;
	bpf_ringbuf_submit(ev, wakeup_flag(nr_pages));
}

/* The key of a folio by address (promotion on activation). */
static __always_inline struct scan_chunk
folio_key(struct folio *folio)
{
	struct scan_chunk key = {.mapping = 0, .chunk = (__u64) folio};

	return key;
}

/* Remember (or, with forget, let go of) the chunks a scan folio covers. */
static __always_inline void
remember_chunks(struct folio *folio, bool forget)
{
	struct scan_chunk key = {.mapping = (__u64) BPF_CORE_READ(folio, mapping)};
	__u64		first = BPF_CORE_READ(folio, index);
	__u64		last = (first + folio_pages(folio) - 1) >> CHUNK_SHIFT;
	__u8		one = 1;

	first >>= CHUNK_SHIFT;
	if (!forget)
		bpf_map_update_elem(&scan_chunk_files, &key.mapping, &one, BPF_ANY);
	for (int i = 0; i < FOLIO_MAX_CHUNKS && first + i <= last; i++)
	{
		key.chunk = first + i;
		if (!forget)
			bpf_map_update_elem(&scan_folios, &key, &one, BPF_ANY);
		else if (bpf_map_lookup_elem(&scan_folios, &key))
			bpf_map_delete_elem(&scan_folios, &key);
	}
}

/* Remember a scan folio for promotion (by chunk or by address). */
static __always_inline void
remember_scan_folio(struct folio *folio)
{
	struct scan_chunk key = folio_key(folio);
	__u8		one = 1;

	if (promote_by_read)
		remember_chunks(folio, false);
	else
		bpf_map_update_elem(&scan_folios, &key, &one, BPF_ANY);
}

/* Is reader a live mark (the same process that was marked)? */
static __always_inline bool
reader_is_live(const struct scan_reader *reader)
{
	__u32		pid = reader->pid;
	struct pce_scan_mark *mark;

	if (pid == 0)
		return false;
	mark = bpf_map_lookup_elem(&scan_pids, &pid);
	return mark && mark->proc_start_ticks == reader->proc_start_ticks;
}

/*
 * The current (marked) process reads mapping: one of the files a scan
 * reads.  It takes its own slot, else one whose reader is gone, else the
 * first.
 */
static __always_inline void
remember_scanned_mapping(struct address_space *mapping,
						 const struct pce_scan_mark *mark, __u32 pid)
{
	struct scan_reader me = {.pid = pid, .proc_start_ticks = mark->proc_start_ticks};
	struct scan_readers fresh = {0};
	struct scan_readers *readers;
	__u64		key = (__u64) mapping;
	int			slot = 0;

	/* an external tree's files (WAL a tar reads) are written by the server itself */
	if (mark->reason == PCE_REASON_EXTERNAL)
		return;
	readers = bpf_map_lookup_elem(&scanned_mappings, &key);
	if (!readers)
	{
		fresh.r[0] = me;
		bpf_map_update_elem(&scanned_mappings, &key, &fresh, BPF_ANY);
		return;
	}
	for (int i = 0; i < PCE_READERS_PER_FILE; i++)
	{
		if (readers->r[i].pid == me.pid && readers->r[i].proc_start_ticks == me.proc_start_ticks)
			return;				/* known already */
		if (slot == 0 && i > 0 && !reader_is_live(&readers->r[i]))
			slot = i;
	}
	if (slot == 0 && reader_is_live(&readers->r[0]))
		slot = PCE_READERS_PER_FILE - 1;	/* all live: the last one's slot */
	readers->r[slot & (PCE_READERS_PER_FILE - 1)] = me;
}

/*
 * Does a live marked process read mapping, a file of the cluster's?  The
 * map is keyed by address and an entry outlives its inode: the owner is
 * asked again, or another account's inode made at the same address would
 * pass for the scan's.
 */
static __always_inline bool
mapping_scanned_now(struct address_space *mapping)
{
	__u64		key = (__u64) mapping;
	struct scan_readers *readers = bpf_map_lookup_elem(&scanned_mappings, &key);

	if (!readers || !mapping_of_cluster(mapping))
		return false;
	for (int i = 0; i < PCE_READERS_PER_FILE; i++)
		if (reader_is_live(&readers->r[i]))
			return true;
	return false;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_page_cache_add, struct folio *folio)
{
	struct address_space *mapping = BPF_CORE_READ(folio, mapping);
	enum pce_reader reader;
	__u64		addr = (__u64) folio;
	__u64		inserter = bpf_get_current_pid_tgid();
	__u32		pid = 0;
	struct pce_scan_mark *mark = file_reader_mark(mapping, &reader, &pid, true);

	count_insertion(reader);
	if (reader == PCE_READER_NONE)
	{
		/* a write-back on a scan's behalf?  Decided when it is dirtied */
		if (KNOB(tracking) && mapping_scanned_now(mapping))
			bpf_map_update_elem(&behalf_pending, &addr, &inserter, BPF_ANY);
		return 0;
	}
	/*
	 * The record first, then the map entry: a promotion can only be sent
	 * once the entry exists, so it always reaches the evictor after the
	 * record it refers to.
	 */
	send_event(mapping, BPF_CORE_READ(folio, index), folio_pages(folio),
			   reader == PCE_READER_EXTERNAL ? PCE_FOLIO_ADDED_EXTERNAL : PCE_FOLIO_ADDED);
	remember_scan_folio(folio);
	if (mark)
		remember_scanned_mapping(mapping, mark, pid);
	return 0;
}

/*
 * A folio is dirtied: if an unmarked task has just inserted it into a file
 * a live scan reads, it is a write-back of what the scan dirtied (the
 * checkpointer, the bgwriter, another backend), and the scan's page.
 */
SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(on_folio_dirtied, struct folio *folio, struct address_space *mapping)
{
	__u64		addr = (__u64) folio;
	__u64	   *inserter = bpf_map_lookup_elem(&behalf_pending, &addr);
	bool		same_task;

	if (!inserter)
		return 0;
	/*
	 * Only a write: the task that inserted the folio dirties it at once.  A
	 * folio an OLTP backend read in and the checkpointer dirtied later is
	 * the OLTP's; so is one inserted before the scan ended.
	 */
	same_task = *inserter == bpf_get_current_pid_tgid();
	if (bpf_map_delete_elem(&behalf_pending, &addr) != 0)
		return 0;				/* somebody else took it */
	if (!same_task || !mapping_scanned_now(BPF_CORE_READ(folio, mapping)))
		return 0;
	stat_inc(PCE_STAT_FOLIOS_ADDED_FOR_SCAN);
	/* the folio's own mapping: the argument may be NULL to the verifier */
	send_event(BPF_CORE_READ(folio, mapping), BPF_CORE_READ(folio, index), folio_pages(folio),
			   PCE_FOLIO_ADDED);
	remember_scan_folio(folio);
	return 0;
}

SEC("tp_btf/mm_filemap_delete_from_page_cache")
int BPF_PROG(on_page_cache_delete, struct folio *folio)
{
	struct scan_chunk key = folio_key(folio);

	__u64		addr = (__u64) folio;

	stat_inc(PCE_STAT_FOLIOS_REMOVED);
	if (bpf_map_lookup_elem(&behalf_pending, &addr))
		bpf_map_delete_elem(&behalf_pending, &addr);
	/* the folio's memory (or chunk) may be reused for another file: forget it */
	if (promote_by_read)
		remember_chunks(folio, true);
	else if (bpf_map_lookup_elem(&scan_folios, &key))
		bpf_map_delete_elem(&scan_folios, &key);
	return 0;
}

/* Is promotion of scan folios switched on (pg_cache_ext.promote_on_access)? */
static __always_inline bool
promotion_enabled(void)
{
	return KNOB(tracking) && KNOB(promote_on_access);
}

/* Is one of the chunks first..last of mapping a scan chunk? */
static __always_inline bool
read_touches_scan_chunk(struct address_space *mapping, __u64 first, __u64 last)
{
	struct scan_chunk key = {.mapping = (__u64) mapping};

	if (!bpf_map_lookup_elem(&scan_chunk_files, &key.mapping))
		return false;
	for (int i = 0; i < READ_MAX_CHUNKS && first + i <= last; i++)
	{
		key.chunk = first + i;
		if (bpf_map_lookup_elem(&scan_folios, &key))
			return true;
	}
	return false;
}

/*
 * A marked process read up to page last of mapping (itself, or an I/O
 * worker for it): its position, for the evictor's sibling rule
 * (src/sibling.c).
 */
static __always_inline void
record_scan_position(struct address_space *mapping, __u64 first, __u64 last,
					 const struct pce_scan_mark *mark, __u32 pid)
{
	struct pce_scan_position pos = {0};
	const struct pce_scan_position *before = bpf_map_lookup_elem(&scan_positions, &pid);
	struct inode *host;

	host = BPF_CORE_READ(mapping, host);
	pos.ino = BPF_CORE_READ(host, i_ino);
	pos.dev = stat_dev(host);
	pos.generation = BPF_CORE_READ(host, i_generation);
	pos.index = last;
	pos.proc_start_ticks = mark->proc_start_ticks;
	pos.marked_at_us = mark->marked_at_us;
	pos.updated_ns = bpf_ktime_get_ns();
	/* the same file in the same statement: it started where it did before */
	if (before && before->ino == pos.ino && before->dev == pos.dev &&
		before->generation == pos.generation &&
		before->proc_start_ticks == pos.proc_start_ticks &&
		before->marked_at_us == pos.marked_at_us)
		pos.start_index = before->start_index;
	else
		pos.start_index = first;
	bpf_map_update_elem(&scan_positions, &pid, &pos, BPF_ANY);
	remember_scanned_mapping(mapping, mark, pid);
}

/*
 * A task reads pages index..last of mapping (filemap_read, in the reading
 * task): a marked one leaves its position; the scan chunks among them that
 * an unmarked task reads are promoted, each once (whoever deletes the entry
 * sends).
 */
static __always_inline int
see_file_read(struct address_space *mapping, __u64 index, __u64 last)
{
	struct scan_chunk key = {.mapping = (__u64) mapping};
	__u64		mapping_key = (__u64) mapping;
	__u64		first = index >> CHUNK_SHIFT;
	struct pce_scan_mark *mark;
	enum pce_reader reader;
	__u32		pid = 0;

	/*
	 * A marked reader leaves its position.  Whether an I/O worker reads for
	 * a marked process is asked only in a file a scan reads: the rule
	 * reads the worker's memory, several times the cost of a lookup, and
	 * an unmarked read of another file must stay at the lookups.
	 */
	mark = file_reader_mark(mapping, &reader, &pid, false);
	if (!mark && bpf_map_lookup_elem(&scanned_mappings, &mapping_key))
		mark = file_reader_mark(mapping, &reader, &pid, true);
	if (mark)
	{
		record_scan_position(mapping, index, last, mark, pid);
		return 0;
	}

	/*
	 * Promotion: who reads is asked again only for a read of a scan chunk,
	 * as in on_folio_activated.  Two loops, not a flag in one: the rule
	 * inlined in the loop is more than the verifier follows.
	 */
	if (!promotion_enabled() || !read_touches_scan_chunk(mapping, first, last >> CHUNK_SHIFT) ||
		current_task_is_scan())
		return 0;
	for (int i = 0; i < READ_MAX_CHUNKS && first + i <= (last >> CHUNK_SHIFT); i++)
	{
		key.chunk = first + i;
		if (!bpf_map_lookup_elem(&scan_folios, &key))
			continue;
		if (bpf_map_delete_elem(&scan_folios, &key) != 0)
			continue;
		stat_inc(PCE_STAT_FOLIOS_PROMOTED);
		send_event(mapping, key.chunk << CHUNK_SHIFT, 1 << CHUNK_SHIFT, PCE_FOLIO_PROMOTED);
	}
	return 0;
}

/* Linux 6.10+: the read tracepoint, once per batch of folios read. */
SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(on_file_read, struct address_space *mapping, unsigned long index, unsigned long last)
{
	return see_file_read(mapping, index, last);
}

/*
 * Kernels before 6.10 (Debian 12's 6.1): the same, at the entry of
 * filemap_read() itself, once per read() with the whole range asked for.
 * Pages past the end of the file are named too; no scan page is there.
 * Where fentry is refused, the loader falls back to on_folio_activated.
 */
SEC("fentry/filemap_read")
int BPF_PROG(on_filemap_read, struct kiocb *iocb, struct iov_iter *iter, ssize_t already_read)
{
	struct file *file = BPF_CORE_READ(iocb, ki_filp);
	__u64		pos = BPF_CORE_READ(iocb, ki_pos);
	__u64		count = BPF_CORE_READ(iter, count);

	if (count == 0 || !file)
		return 0;
	return see_file_read(BPF_CORE_READ(file, f_mapping), pos >> page_shift,
						 (pos + count - 1) >> page_shift);
}

/*
 * Kernels without mm_filemap_get_pages: activation is batched per CPU, so
 * the task at hand is the one that drained the batch, not always the one
 * that touched the folio (see the top of this file).
 */
SEC("tp_btf/mm_lru_activate")
int BPF_PROG(on_folio_activated, struct folio *folio)
{
	struct scan_chunk key = folio_key(folio);

	/* the common case, a folio no scan brought in, ends here */
	if (!bpf_map_lookup_elem(&scan_folios, &key))
		return 0;
	if (!promotion_enabled() || current_task_is_scan())
		return 0;
	/* only the first activation promotes: whoever deletes the entry sends */
	if (bpf_map_delete_elem(&scan_folios, &key) != 0)
		return 0;
	stat_inc(PCE_STAT_FOLIOS_PROMOTED);
	send_event(BPF_CORE_READ(folio, mapping), BPF_CORE_READ(folio, index),
			   folio_pages(folio), PCE_FOLIO_PROMOTED);
	return 0;
}

/*
 * A process tree outside the server (pg_cache_ext_run) is marked as a whole:
 * every task it forks inherits its mark (inherit_external_mark).  Attached
 * in both mechanisms, since the cache_ext policy reads the same marks.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_process_fork, struct task_struct *parent, struct task_struct *child)
{
	inherit_external_mark(parent, child);
	return 0;
}
