/*
 * pg_cache_ext.h
 *		The one contract between the BPF programs, the loader and the
 *		PostgreSQL module: map names, key/value layouts, counters and knobs.
 *
 * This header is included by BPF code (after vmlinux.h) and by ordinary C
 * code (after <linux/types.h>), so it may only use __u32/__u64 and plain
 * constants.  Any change to a layout here changes both sides at once; bump
 * PCE_ABI_VERSION when a layout changes so that a module built against one
 * layout refuses maps pinned by a loader built against another.
 */
#ifndef PG_CACHE_EXT_H
#define PG_CACHE_EXT_H

#define PCE_ABI_VERSION			3	/* 3: loader_info records the read hook */

/* Names of the pins below <bpffs>/pg_cache_ext/<cluster id>/ */
#define PCE_PIN_SCAN_PIDS		"scan_pids"
#define PCE_PIN_STATS			"stats"
#define PCE_PIN_KNOBS			"knobs"
#define PCE_PIN_FOLIO_EVENTS	"folio_events"
#define PCE_PIN_TRACKER_LINK	"tracker_link"
#define PCE_PIN_POLICY_LINK		"policy_link"
#define PCE_PIN_POLICY_MAP		"policy_ops"
#define PCE_PIN_LOADER_INFO		"loader_info"
#define PCE_PIN_TRACKER_REMOVE_LINK "tracker_remove_link"
#define PCE_PIN_TRACKER_ACTIVATE_LINK "tracker_activate_link"
#define PCE_PIN_POLICY_STATE	"policy_state"
#define PCE_PIN_TRACKER_FORK_LINK "tracker_fork_link"
#define PCE_PIN_IO_WORKERS		"io_workers"
#define PCE_PIN_SCAN_OWNERS		"scan_owners"
#define PCE_PIN_SCAN_POSITIONS	"scan_positions"
#define PCE_PIN_TRACKER_WRITEBACK_LINK "tracker_writeback_link"

/* Capacity of the scan-PID map: more than any max_connections we expect. */
#define PCE_MAX_SCAN_PIDS		8192

/* Size of the ring buffer of folio insertions by scan PIDs (bytes). */
#define PCE_FOLIO_EVENTS_BYTES	(8 * 1024 * 1024)

/*
 * The stock-kernel evictor reads the ring in batches of records of this
 * many bytes of scan pages, dropping after each (src/evictor.c); the
 * tracker wakes it once records of a quarter of a batch have come since
 * the last wakeup (bpf/tracker.bpf.c), and the worker's timer covers the
 * rest.
 */
#define PCE_EVICT_BATCH_BYTES	(2 * 1024 * 1024)
#define PCE_WAKEUP_BYTES		(PCE_EVICT_BATCH_BYTES / 4)

/*
 * Why a PID is marked: every reason, its name, and whether it is a utility
 * command of pg_cache_ext.scan_commands (whose word is the reason's name).
 * The one table of reasons and commands: the enum below, the names that
 * cache_ext_scans() and cache_ext_stats() show, the scan_commands parser,
 * its help and error text are all made from it.  The enum's values are
 * stored in the scan-PID map: add a reason at the end (before TEST is fine
 * only with a PCE_ABI_VERSION bump).
 *
 * X(symbol, name, is_command)
 */
#define PCE_REASON_TABLE(X) \
	X(NONE, "none", 0) \
	X(SEQSCAN, "seqscan", 0)	/* a large SeqScan / BitmapHeapScan / TidRangeScan */ \
	X(VACUUM, "vacuum", 1) \
	X(ANALYZE, "analyze", 1) \
	X(CREATE_INDEX, "create_index", 1) \
	X(REINDEX, "reindex", 1) \
	X(CLUSTER, "cluster", 1) \
	X(REFRESH_MATVIEW, "refresh_matview", 1) \
	X(COPY_TO, "copy_to", 1) \
	X(AUTOVACUUM, "autovacuum", 0) \
	X(BASEBACKUP, "basebackup", 0) \
	X(SESSION, "session", 0)	/* SET pg_cache_ext.scan = on */ \
	X(TEST, "test", 0)			/* marked by a test tool, not by PostgreSQL */ \
	X(EXTERNAL, "external", 0)	/* a process tree outside the server: pg_cache_ext_run */

#define PCE_REASON_ENUM_ENTRY(sym, name, is_command) PCE_REASON_##sym,
enum pce_reason
{
	PCE_REASON_TABLE(PCE_REASON_ENUM_ENTRY)
	PCE_REASON__COUNT
};
#undef PCE_REASON_ENUM_ENTRY

/* The names: an initializer for a const char *[PCE_REASON__COUNT] in user space. */
#define PCE_REASON_NAME_ENTRY(sym, name, is_command) [PCE_REASON_##sym] = name,
#define PCE_REASON_NAMES { PCE_REASON_TABLE(PCE_REASON_NAME_ENTRY) }

/* A utility command's bit in a pg_cache_ext.scan_commands mask, by reason. */
#define PCE_CMD_BIT(reason)		(1 << (reason))
#define PCE_CMD_BIT_IF_COMMAND(sym, name, is_command) | ((is_command) ? PCE_CMD_BIT(PCE_REASON_##sym) : 0)
#define PCE_CMD_ALL				(0 PCE_REASON_TABLE(PCE_CMD_BIT_IF_COMMAND))

/*
 * Value of the scan-PID map, keyed by the __u32 thread id the kernel sees
 * (for PostgreSQL backends, the process id).
 *
 * proc_start_ticks is field 22 of /proc/<pid>/stat: the background worker
 * compares it with the live process to drop entries whose PID has died or
 * been reused.
 *
 * Marks of reason PCE_REASON_EXTERNAL belong to a process tree outside the
 * server (pg_cache_ext_run and everything it starts): the tracker copies
 * them from parent to child at every fork (threads included), each copy
 * with the child's own start time, and each names the tree's root (the
 * wrapper).  The worker drops every mark whose root is gone, so a wrapper
 * killed with SIGKILL leaves nothing behind for long.
 */
struct pce_scan_mark
{
	__u64		proc_start_ticks;
	__u64		marked_at_us;	/* PostgreSQL timestamp (us since 2000) */
	__u32		reason;			/* enum pce_reason */
	__u32		relid;			/* main relation scanned, or 0 */
	__u32		dboid;
	__u32		root_pid;		/* PCE_REASON_EXTERNAL: the tree's root, else 0 */
	__u64		root_start_ticks;	/* ... and its start time, as proc_start_ticks */
};

/*
 * PostgreSQL 18+ asynchronous I/O (io_method = worker): an I/O worker
 * process performs the read of an I/O that a backend owns.  The BPF side
 * attributes the pages an I/O worker inserts to the owner of the I/O it is
 * executing (see "Who read the page" in maps.bpf.h):
 *
 * io_workers	the cluster's I/O worker processes, by PID, each with where
 *				to find, in its own memory, the I/O it is executing: the
 *				worker's error context (PostgreSQL's error_context_stack)
 *				has the I/O handle as its argument while it performs the
 *				I/O, and the handle holds its owner's ProcNumber.  Written
 *				by the module's background worker.
 * scan_owners	marked processes by ProcNumber: which mark of scan_pids an
 *				I/O owned by that ProcNumber belongs to.  Written with the
 *				mark when the server uses I/O workers.
 *
 * The addresses are the server's own (every process of a cluster is
 * forked from the postmaster, so they are the same in all of them).
 */
#define PCE_MAX_IO_WORKERS		64	/* 18: io_workers <= 32; 19: io_max_workers */

struct pce_io_worker
{
	__u64		proc_start_ticks;	/* of the I/O worker, as in pce_scan_mark */
	__u64		error_context_stack;	/* address of the variable */
	__u64		io_handles;		/* pgaio_ctl->io_handles */
	__u32		io_handle_count;	/* pgaio_ctl->io_handle_count */
	__u32		io_handle_size;	/* sizeof(PgAioHandle) */
	__u32		owner_offset;	/* offsetof(PgAioHandle, owner_procno) */
	__u32		context_arg_offset;	/* offsetof(ErrorContextCallback, arg) */
	__u32		context_previous_offset;	/* offsetof(ErrorContextCallback, previous) */
	__u32		reserved;		/* 0 */
};

struct pce_scan_owner
{
	__u64		proc_start_ticks;	/* the mark's, so a stale entry matches nothing */
	__u32		pid;			/* key of the mark in scan_pids */
	__u32		reserved;		/* 0 */
};

/*
 * Counters kept by the BPF programs, in a per-CPU array indexed by enum
 * pce_stat.  Both mechanisms use the same layout; a mechanism leaves the
 * counters it has no use for at zero.  One line per counter: its enum
 * symbol is PCE_STAT_ and its name (as cache_ext_stats() and the loader's
 * --show print it) in capitals.  An unused counter has no name (NULL):
 * readers skip it.  Add a counter at the end (the map's layout).
 *
 * X(symbol, name)
 */
#define PCE_STAT_TABLE(X) \
	X(FOLIOS_ADDED_SCAN, "folios_added_scan")		/* inserted by a marked PID */ \
	X(FOLIOS_ADDED_OTHER, "folios_added_other")	/* inserted by anyone else */ \
	X(RECORDS_LOST, "records_lost")		/* ring buffer full: a scan folio not recorded */ \
	X(FOLIOS_EVICTED_SCAN, "folios_evicted_scan")	/* cache_ext: from the scan list */ \
	X(FOLIOS_EVICTED_MAIN, "folios_evicted_main")	/* cache_ext: from the main list */ \
	X(FOLIOS_PROMOTED, "folios_promoted")	/* scan folio touched by a non-scan task */ \
	X(EVICT_REQUESTS_UNFILLED, "evict_requests_unfilled")	/* cache_ext */ \
	X(UNUSED_7, 0)	/* never counted: keeps the layout (was a read bypass, removed as unsafe) */ \
	X(FOLIOS_REMOVED, "folios_removed")	/* removed from the cache (any list) */ \
	X(FOLIOS_UNTRACKED, "folios_untracked")	/* cache_ext: folio_lists full, left to the kernel's LRU */ \
	X(FOLIOS_LIST_REFUSED, "folios_list_refused")	/* cache_ext: the kernel refused to list it (another NUMA node) */ \
	X(FOLIOS_ADDED_EXTERNAL, "folios_added_external")	/* of folios_added_scan: by an external tree */ \
	X(MARKS_INHERITED, "marks_inherited")	/* external marks copied to a new child or thread */ \
	X(FOLIOS_ADDED_SCAN_BY_IO_WORKER, "folios_added_scan_by_io_worker")	/* part of folios_added_scan: an I/O worker did a marked process's I/O */ \
	X(FOLIOS_ADDED_SCAN_BY_IO_THREAD, "folios_added_scan_by_io_thread")	/* part of folios_added_scan: another thread of it (io_uring's iou-wrk) */ \
	X(FOLIOS_ADDED_FOR_SCAN, "folios_added_for_scan")	/* of folios_added_other: written into a file a live scan reads, by another process (write-back of what the scan dirtied): recorded as the scan's */

#define PCE_STAT_ENUM_ENTRY(sym, name) PCE_STAT_##sym,
enum pce_stat
{
	PCE_STAT_TABLE(PCE_STAT_ENUM_ENTRY)
	PCE_STAT__COUNT
};
#undef PCE_STAT_ENUM_ENTRY

/* The names: an initializer for a const char *[PCE_STAT__COUNT] in user space. */
#define PCE_STAT_NAME_ENTRY(sym, name) [PCE_STAT_##sym] = name,
#define PCE_STAT_NAMES { PCE_STAT_TABLE(PCE_STAT_NAME_ENTRY) }

/*
 * Knobs written by the module (from its settings, at start and at every
 * reload) into the single entry of the knobs array map and read by BPF.
 *
 * Each knob's default is defined once, beside it: the loader writes the
 * defaults when it creates the map, the BPF programs use them while the
 * knobs were never written (abi_version 0), and the module's GUCs of the
 * same name boot with them.  Adding a knob: a field here, its default
 * below, its GUC (pg_cache_ext.c), PceSettings and pce_knobs_from_settings()
 * (status.c), and the BPF code that reads it through KNOB() (maps.bpf.h).
 */
struct pce_knobs
{
	__u32		abi_version;	/* PCE_ABI_VERSION once written */
	__u32		tracking;		/* 0: BPF ignores the scan map (mode = off) */
	__u32		promote_on_access;	/* promote scan folios touched by others */
	__u32		scan_min_percent;	/* cache_ext: scan list below this share of the
									 * cgroup is not drained first */
	__u32		reserved[2];	/* 0; reserved[0] was a read bypass, removed */
	__u32		pid_ns_ino;		/* not a GUC: the inode number of the server's PID
								 * namespace (stat /proc/self/ns/pid), whose PIDs
								 * the scan-PID map holds; 0: the initial one */
	__u32		io_workers;		/* the server reads through I/O workers
								 * (io_method = worker): look them up */
};

#define PCE_KNOB_DEFAULT_tracking			1
#define PCE_KNOB_DEFAULT_promote_on_access	1
#define PCE_KNOB_DEFAULT_scan_min_percent	5
#define PCE_KNOB_MAX_scan_min_percent		100
#define PCE_KNOB_DEFAULT_pid_ns_ino			0
#define PCE_KNOB_DEFAULT_io_workers			0	/* set by the module from io_method */

/*
 * The initial PID namespace's inode number (PROC_PID_INIT_INO, fixed in the
 * kernel): a server there keys marks by the PIDs bpf_get_current_pid_tgid()
 * returns, with no namespace walk.
 */
#define PCE_INIT_PID_NS_INO		0xEFFFFFFCU

/* A knob's default by its field name: PCE_KNOB_DEFAULT(scan_min_percent) */
#define PCE_KNOB_DEFAULT(field)		PCE_KNOB_DEFAULT_##field

/* The knobs as the loader first writes them. */
static inline void
pce_knobs_defaults(struct pce_knobs *k)
{
	*k = (struct pce_knobs)
	{
		.abi_version = PCE_ABI_VERSION,
		.tracking = PCE_KNOB_DEFAULT(tracking),
		.promote_on_access = PCE_KNOB_DEFAULT(promote_on_access),
		.scan_min_percent = PCE_KNOB_DEFAULT(scan_min_percent),
		.io_workers = PCE_KNOB_DEFAULT(io_workers),
	};
}

/*
 * One record in the folio_events ring buffer: a folio a marked PID brought
 * into the page cache (PCE_FOLIO_ADDED), or a folio so recorded that a task
 * that is not scanning has since touched (PCE_FOLIO_PROMOTED: the evictor
 * keeps its pages), or a folio a task of an external tree brought in
 * (PCE_FOLIO_ADDED_EXTERNAL: the evictor tracks more of the cluster's files
 * for those, src/file_index.c).  dev is the kernel's internal dev_t
 * encoding (major << 20 | minor).
 */
enum pce_folio_event_kind
{
	PCE_FOLIO_ADDED = 0,
	PCE_FOLIO_PROMOTED = 1,
	PCE_FOLIO_ADDED_EXTERNAL = 2,
};

struct pce_folio_event
{
	__u64		ino;
	__u64		index;			/* first page index of the folio */
	__u32		dev;
	__u32		nr_pages;
	__u32		generation;		/* the inode's i_generation, which changes when
								 * its number is reused (0 from a tracker that
								 * does not record it) */
	__u32		kind;			/* enum pce_folio_event_kind */
};

/*
 * Stock mechanism: where each marked process last read (the tracker's
 * read hook, PCE_READ_HOOK_TABLE), keyed like
 * scan_pids by the process's PID as the server sees it.  The evictor keeps
 * a scan page while a live marked reader of the same relation has yet to
 * reach it (src/sibling.c).  An LRU map: a position nobody reads any more
 * is pushed out by newer ones.
 */
struct pce_scan_position
{
	__u64		ino;			/* the file last read */
	__u64		index;			/* the last page of that read */
	__u64		proc_start_ticks;	/* of the reader, as in pce_scan_mark */
	__u64		updated_ns;		/* bpf_ktime_get_ns() (CLOCK_MONOTONIC) of the read */
	__u64		start_index;	/* the first page of its first read of this file
								 * in this statement: where it started */
	__u64		marked_at_us;	/* the statement's, as in pce_scan_mark */
	__u32		dev;			/* as stat() reports it, as in pce_folio_event */
	__u32		generation;		/* the inode's i_generation */
};

/*
 * Stock mechanism: how many folios brought in by scans the tracker
 * remembers (by address) so that a later touch by another task can be seen
 * as a promotion.  An LRU map: when it is full the oldest scan folios are
 * forgotten, which only means they can no longer be promoted.  65536
 * entries cover 256 MiB of 4 KiB folios, several times the default budget.
 */
#define PCE_MAX_SCAN_FOLIOS		65536

/*
 * The cache_ext policy's state, shared by the policy (bpf/policy.bpf.c) and
 * the loader through the root-only pin policy_state: an mmap-able array of
 * one entry, so that each side stores its own fields and never rewrites
 * the other's.
 *
 * phase is the loader's: a detach first makes the policy stop putting
 * folios on its lists (DRAINING) and empties them by reclaim, then makes it
 * stop using its lists at all (UNLINKING) before the research kernel frees
 * them (loader/policy.c, pce_detach_policy()).  nr_*_folios are the
 * policy's.  The saved_* fields are the detach's record of the limits it
 * lifts for the teardown, and teardown_map_id the struct_ops map whose
 * freeing says the teardown is over: the record is kept until then (a
 * loader killed midway, or a teardown slower than the loader's wait,
 * leaves it), and only then does a run put the limits back
 * (pce_policy_resume_interrupted()).  While a record is kept, no attach or
 * detach may start (one record, never overwritten).
 */
enum pce_policy_phase
{
	PCE_POLICY_ACTIVE = 0,		/* lists maintained, eviction from them */
	PCE_POLICY_DRAINING = 1,	/* nothing new listed or moved; eviction from the lists */
	PCE_POLICY_UNLINKING = 2,	/* no list call at all: the kernel frees the lists */
};

#define PCE_LIMIT_TEXT_MAX		32	/* "max" or a byte count, as memory.max says */

struct pce_policy_state
{
	__u32		phase;			/* enum pce_policy_phase; loader */
	__u32		limits_saved;	/* 1: the saved_* fields hold limits to restore; loader */
	__s64		nr_scan_folios; /* folios on the scan list (approximate); policy */
	__s64		nr_main_folios; /* folios on the main list (approximate); policy */
	__u64		saved_cgroup_id;	/* the cgroup whose limits were lifted; loader */
	char		saved_max[PCE_LIMIT_TEXT_MAX];	/* its memory.max before */
	char		saved_high[PCE_LIMIT_TEXT_MAX]; /* its memory.high before */
	__u32		teardown_map_id;	/* the struct_ops map being freed (0: none); loader */
	__u32		reserved;		/* 0 */
};

/* Which eviction mechanism the loader put in place. */
enum pce_mechanism
{
	PCE_MECH_NONE = 0,
	PCE_MECH_STOCK,				/* tracker + user-space evictor */
	PCE_MECH_CACHE_EXT,			/* struct_ops policy on the cluster's cgroup */
};

/*
 * Where the stock tracker sees a task read a file, in the reading task:
 * the readers' positions (the sibling rule, src/sibling.c) and promotion
 * on reads come from it.  The loader tries them in this order, from the
 * first --read-hook names (auto: the first), takes the first the kernel
 * offers and accepts, and records it in loader_info.  With none, promotion
 * falls back to activations (tp_btf/mm_lru_activate) and there are no
 * positions.
 *
 * X(symbol, name, program, BTF name of its attach point, attach type)
 */
#define PCE_READ_HOOK_TABLE(X) \
	X(PCE_READ_HOOK_TRACEPOINT, "tracepoint", "tp_btf/mm_filemap_get_pages", \
	  "mm_filemap_get_pages", BPF_TRACE_RAW_TP)	/* 6.10+ */ \
	X(PCE_READ_HOOK_FENTRY, "fentry", "fentry/filemap_read", \
	  "filemap_read", BPF_TRACE_FENTRY)	/* 5.12+, where fentry is allowed */ \
	X(PCE_READ_HOOK_NONE, "none", "", "", 0)

/* --read-hook=auto: the table's first */
#define PCE_READ_HOOK_FIRST		PCE_READ_HOOK_TRACEPOINT

/* for messages: keep in step with the table */
#define PCE_READ_HOOK_CHOICES "auto, tracepoint, fentry or none"

#define PCE_READ_HOOK_ENUM_ENTRY(sym, name, program, btf_name, attach_type) sym,
enum pce_read_hook
{
	PCE_READ_HOOK_TABLE(PCE_READ_HOOK_ENUM_ENTRY)
};
#undef PCE_READ_HOOK_ENUM_ENTRY

/*
 * What the loader did, written by the loader into the single entry of the
 * loader_info array map, so that cache_ext_status() can report it after the
 * loader has exited.
 */
struct pce_loader_info
{
	__u32		abi_version;
	__u32		mechanism;		/* enum pce_mechanism */
	__u32		read_hook;		/* enum pce_read_hook the tracker attached */
	__u32		loader_pid;
	__u64		loaded_at_unix;	/* seconds since the epoch */
	char		cgroup[128];	/* cgroup the policy is attached to, if any */
	char		reason[256];	/* why this mechanism (and not the other) */
};

#endif							/* PG_CACHE_EXT_H */
