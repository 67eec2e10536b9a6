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
 * an I/O worker performing its I/O: current_reader() in maps.bpf.h), we
 * push (dev, inode, index, size) into a ring buffer.  The background worker in PostgreSQL drains the ring,
 * coalesces records into per-file extents and drops the oldest extents with
 * posix_fadvise(DONTNEED) once the scans' pages exceed a budget.
 *
 * Pages that were already cached when the scan read them are never
 * inserted, so never recorded, so never dropped: the OLTP hot set that a
 * scan merely re-reads stays where it is.
 *
 * The other way round, a page a scan brought in may be exactly what the
 * OLTP load needs next (an analytical query over the table the OLTP load
 * uses).  The tracker remembers the scan's folios by address.  The scan's
 * own read marks such a folio referenced; when somebody touches it again,
 * the kernel activates it (mm_lru_activate: the kernel's own "this page is
 * in use" signal).  Unless the task at hand is itself scanning, the tracker
 * then sends a promotion record, and the evictor leaves those pages to the
 * kernel's LRU, as the cache_ext policy moves such a folio to its main
 * list.  pg_cache_ext.promote_on_access switches this off.  (fentry on
 * folio_mark_accessed would see every touch, but fentry is refused on the
 * kernels this runs on; and with MGLRU the kernel activates nothing, so
 * there nothing is promoted.)
 *
 * Insertions by unmarked tasks cost one hash lookup (two when the server
 * reads through I/O workers: maps.bpf.h) and one per-CPU
 * increment; an activation costs one lookup in the scan-folio map.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "maps.bpf.h"

char		LICENSE[] SEC("license") = "GPL";

/* Folios inserted by scan PIDs, for the evictor in user space. */
struct
{
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, PCE_FOLIO_EVENTS_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			folio_events SEC(".maps");

/*
 * Folios that scans brought in and that are still cached, by address.  Not
 * pinned: it lives as long as the tracker's programs, so after a loader
 * rerun the folios recorded before can still be dropped but no longer
 * promoted.
 */
struct
{
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PCE_MAX_SCAN_FOLIOS);
	__type(key, __u64);
	__type(value, __u8);
}			scan_folios SEC(".maps");

/*
 * folio_nr_pages(): a large folio has PG_head in its flags and its order in
 * the low byte of _flags_1.  The flags word is the first word of a folio
 * (and of a page) on every kernel, but its type changed (unsigned long up to
 * 6.17, a one-word struct since), and CO-RE refuses a field whose type kind
 * differs from the build machine's.  So read the first word by address.
 */
static __always_inline __u32
folio_pages(struct folio *folio)
{
	unsigned long flags = 0;
	unsigned long head = 1UL << bpf_core_enum_value(enum pageflags, PG_head);

	bpf_probe_read_kernel(&flags, sizeof(flags), (void *) folio);
	if (!(flags & head))
		return 1;
	return 1U << (BPF_CORE_READ(folio, _flags_1) & 0xff);
}

static __always_inline void
send_folio_event(struct folio *folio, enum pce_folio_event_kind kind)
{
	struct pce_folio_event *ev;
	struct inode *host;

	ev = bpf_ringbuf_reserve(&folio_events, sizeof(*ev), 0);
	if (!ev)
	{
		stat_inc(PCE_STAT_RECORDS_LOST);
		return;
	}
	host = BPF_CORE_READ(folio, mapping, host);
	ev->ino = BPF_CORE_READ(host, i_ino);
	ev->dev = BPF_CORE_READ(host, i_sb, s_dev);
	ev->index = BPF_CORE_READ(folio, index);
	ev->nr_pages = folio_pages(folio);
	ev->reserved = 0;
	ev->kind = kind;
	bpf_ringbuf_submit(ev, 0);
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_page_cache_add, struct folio *folio)
{
	__u64		key = (__u64) folio;
	__u8		one = 1;
	enum pce_reader reader = current_reader();

	count_insertion(reader);
	if (reader == PCE_READER_NONE)
		return 0;
	/*
	 * The record first, then the map entry: a promotion can only be sent
	 * once the entry exists, so it always reaches the evictor after the
	 * record it refers to.
	 */
	send_folio_event(folio, PCE_FOLIO_ADDED);
	bpf_map_update_elem(&scan_folios, &key, &one, BPF_ANY);
	return 0;
}

SEC("tp_btf/mm_filemap_delete_from_page_cache")
int BPF_PROG(on_page_cache_delete, struct folio *folio)
{
	__u64		key = (__u64) folio;

	stat_inc(PCE_STAT_FOLIOS_REMOVED);
	/* the folio's memory may be reused for another file: forget it */
	if (bpf_map_lookup_elem(&scan_folios, &key))
		bpf_map_delete_elem(&scan_folios, &key);
	return 0;
}

/* Is promotion of scan folios switched on (pg_cache_ext.promote_on_access)? */
static __always_inline bool
promotion_enabled(void)
{
	return KNOB(tracking) && KNOB(promote_on_access);
}

/*
 * Activation is batched per CPU, so the task at hand is the one that
 * filled the batch: nearly always the one that touched the folio.
 */
SEC("tp_btf/mm_lru_activate")
int BPF_PROG(on_folio_activated, struct folio *folio)
{
	__u64		key = (__u64) folio;

	/* the common case, a folio no scan brought in, ends here */
	if (!bpf_map_lookup_elem(&scan_folios, &key))
		return 0;
	if (!promotion_enabled() || current_task_is_scan())
		return 0;
	/* only the first activation promotes: whoever deletes the entry sends */
	if (bpf_map_delete_elem(&scan_folios, &key) != 0)
		return 0;
	stat_inc(PCE_STAT_FOLIOS_PROMOTED);
	send_folio_event(folio, PCE_FOLIO_PROMOTED);
	return 0;
}
