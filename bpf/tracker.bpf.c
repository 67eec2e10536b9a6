/*
 * tracker.bpf.c
 *		Stock-kernel mechanism: record the folios that scans bring into the
 *		page cache.
 *
 * On a kernel without cache_ext we cannot choose what the kernel evicts, but
 * we can see every folio as it is inserted into the page cache: the
 * mm_filemap_add_to_page_cache tracepoint fires in the context of the task
 * whose read caused the insertion (including its readahead).  When that
 * task's PID is in the scan-PID map, we push (dev, inode, index, size) into
 * a ring buffer.  The background worker in PostgreSQL drains the ring,
 * coalesces records into per-file extents and drops the oldest extents with
 * posix_fadvise(DONTNEED) once the scans' pages exceed a budget.
 *
 * Pages that were already cached when the scan read them are never
 * inserted, so never recorded, so never dropped: the OLTP hot set that a
 * scan merely re-reads stays where it is.
 *
 * Insertions by unmarked tasks cost one hash lookup and one per-CPU
 * increment.
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
record_scan_folio(struct folio *folio)
{
	struct pce_folio_event *ev;
	struct inode *host;

	ev = bpf_ringbuf_reserve(&folio_events, sizeof(*ev), 0);
	if (!ev)
	{
		stat_inc(PCE_STAT_EVENTS_LOST);
		return;
	}
	host = BPF_CORE_READ(folio, mapping, host);
	ev->ino = BPF_CORE_READ(host, i_ino);
	ev->dev = BPF_CORE_READ(host, i_sb, s_dev);
	ev->index = BPF_CORE_READ(folio, index);
	ev->nr_pages = folio_pages(folio);
	ev->pid = (__u32) bpf_get_current_pid_tgid();
	ev->pad = 0;
	bpf_ringbuf_submit(ev, 0);
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_page_cache_add, struct folio *folio)
{
	if (current_task_is_scan())
	{
		stat_inc(PCE_STAT_FOLIOS_ADDED_SCAN);
		record_scan_folio(folio);
	}
	else
		stat_inc(PCE_STAT_FOLIOS_ADDED_OTHER);
	return 0;
}

SEC("tp_btf/mm_filemap_delete_from_page_cache")
int BPF_PROG(on_page_cache_delete, struct folio *folio)
{
	stat_inc(PCE_STAT_FOLIOS_REMOVED);
	return 0;
}
