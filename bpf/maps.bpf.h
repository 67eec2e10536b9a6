/*
 * maps.bpf.h
 *		Map definitions shared by every BPF object of pg_cache_ext.
 *
 * Each map is pinned by name (LIBBPF_PIN_BY_NAME) below the cluster's pin
 * directory, which the loader passes as pin_root_path.  Because the tracker
 * and the cache_ext policy declare the very same maps, whichever object is
 * loaded reuses the pins that already exist: marks and counters survive a
 * loader restart or a switch of mechanism.
 */
#ifndef PCE_MAPS_BPF_H
#define PCE_MAPS_BPF_H

#include "pg_cache_ext.h"

/* PIDs of backends that are scanning, written by the PostgreSQL module. */
struct
{
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PCE_MAX_SCAN_PIDS);
	__type(key, __u32);
	__type(value, struct pce_scan_mark);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			scan_pids SEC(".maps");

/* The cluster's I/O worker processes, by PID (pg_cache_ext.h). */
struct
{
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PCE_MAX_IO_WORKERS);
	__type(key, __u32);
	__type(value, struct pce_io_worker);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			io_workers SEC(".maps");

/* Marked processes by ProcNumber, for I/O they own (pg_cache_ext.h). */
struct
{
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PCE_MAX_SCAN_PIDS);
	__type(key, __u32);
	__type(value, struct pce_scan_owner);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			scan_owners SEC(".maps");

/* Event counters, one slot per enum pce_stat, per CPU. */
struct
{
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PCE_STAT__COUNT);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			stats SEC(".maps");

/* Knobs written from GUCs by the module; one entry. */
struct
{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pce_knobs);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			knobs SEC(".maps");

/* What the loader did; written by the loader, read by the module. */
struct
{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pce_loader_info);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			loader_info SEC(".maps");

static __always_inline void
stat_inc(enum pce_stat which)
{
	__u32		key = which;
	__u64	   *counter = bpf_map_lookup_elem(&stats, &key);

	if (counter)
		(*counter)++;
}

static __always_inline const struct pce_knobs *
current_knobs(void)
{
	__u32		key = 0;

	return bpf_map_lookup_elem(&knobs, &key);
}

/*
 * A knob's value: what the module wrote, or its default from
 * pg_cache_ext.h while the knobs were never written (abi_version 0).
 */
#define KNOB(field) ({ \
	const struct pce_knobs *k__ = current_knobs(); \
	(__u32) ((k__ && k__->abi_version != 0) ? k__->field : PCE_KNOB_DEFAULT(field)); \
})

/*
 * Who read the page: the attribution rule both mechanisms share.
 *
 * A page belongs to a scan when the read that brought it in (or touched
 * it) was done for a marked process, whoever did it:
 *
 *	1. the marked process itself (PostgreSQL up to 17; 18 with io_method =
 *	   sync; 18's fall-backs to a synchronous read in the backend), or
 *	   another thread of it: with io_method = io_uring the kernel may punt a
 *	   read to an io-wq worker thread (iou-wrk-N) of the submitting
 *	   process.  So the scan-PID map is looked up by thread group (TGID),
 *	   and the mark's start time is compared with the group leader's.
 *	2. an I/O worker (io_method = worker, the default from 18 on) executing
 *	   an I/O that a marked process owns.  While it performs an I/O, the
 *	   worker's error context callback has the I/O handle as its argument
 *	   (method_worker.c: "I/O worker executing I/O on behalf of process
 *	   %d"), and the handle, in shared memory, holds its owner's
 *	   ProcNumber.  The io_workers entry of the worker says where those
 *	   are; scan_owners maps the ProcNumber to its mark.  A worker
 *	   performing an unmarked backend's I/O inserts ordinary pages, so an
 *	   OLTP backend's reads stay on the main side even when an I/O worker
 *	   does them, and they promote scan pages as the backend's own reads
 *	   would.
 *
 * Only a task running as the cluster's account (real and effective uid,
 * against the uid the root loader put in the read-only data) is ever taken
 * for an I/O worker, and only such a task's memory is read
 * (current_task_is_cluster_account): io_workers and scan_owners are the
 * server group's to write, so without it a group member could register
 * another user's process, root's included, and read its memory through
 * what gets attributed.  With it, those maps cannot make the rule attribute
 * (or promote by) another account's reads either: the pages a root process
 * reads stay on the main side whatever the maps say.  (A process marked in
 * scan_pids itself, rule 1, is a matter of marks, not of reading memory.)
 *
 * The worker's memory is read with bpf_probe_read_user(), which never
 * faults: the worker has just used the handle, its stack and the variable,
 * so they are mapped; if a read fails anyway the page is simply not
 * attributed (it stays on the main side).  An unmarked backend's insertion
 * costs one hash lookup (scan_pids) as before, and a second (io_workers)
 * only when the server reads through I/O workers (knob io_workers).
 *
 * A mark of reason external (a process tree outside the server,
 * pg_cache_ext_run) is found by the same lookup, and the rule says so
 * (PCE_READER_EXTERNAL, for the process and its threads alike): the
 * counters, the tracker's record and the policy take it from there, with no
 * second lookup.  The fork program keys the marks it hands down by the
 * same ids (the thread group, as the server sees PIDs).
 */
enum pce_reader
{
	PCE_READER_NONE = 0,		/* not for a scan */
	PCE_READER_SELF,			/* the marked process */
	PCE_READER_THREAD,			/* another thread of it (io_uring's iou-wrk) */
	PCE_READER_IO_WORKER,		/* an I/O worker performing its I/O */
	PCE_READER_EXTERNAL,		/* a task of an external tree (any thread) */
};

/* Error contexts the rule looks through for the I/O handle (the first has it). */
#define PCE_ERROR_CONTEXT_DEPTH		3

/*
 * Start time of the current process as /proc/<pid>/stat shows it: the
 * thread group leader's start_boottime in clock ticks (USER_HZ, 100 on
 * every architecture we build for).
 */
#define PCE_NSEC_PER_USER_HZ_TICK	10000000ULL

static __always_inline __u64
current_process_start_ticks(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return BPF_CORE_READ(task, group_leader, start_boottime) / PCE_NSEC_PER_USER_HZ_TICK;
}

/*
 * Is the current process the one that was marked, and not a later one that
 * got the same PID after the marked one died without unmarking?
 */
static __always_inline bool
task_matches_mark(const struct pce_scan_mark *mark)
{
	/* 0: marked by a tool that did not know the start time */
	return mark->proc_start_ticks == 0 ||
		mark->proc_start_ticks == current_process_start_ticks();
}

/*
 * A task's PID (or TGID) as the server sees PIDs.  The server puts its own
 * PIDs (MyProcPid) in the map, and a server in a container has a PID
 * namespace of its own: there the same process is, say, 57 to itself and
 * 81234 to bpf_get_current_pid_tgid().  The module writes the inode number
 * of its PID namespace into the knobs (pid_ns_ino); a task whose own PID
 * namespace (the last level of its struct pid) is another one is not one of
 * the server's processes.  bpf_get_ns_current_pid_tgid() does the same, but
 * the cache_ext policy (struct_ops, 6.6) may not call it, while both may
 * read the current task; so the tracker and the policy read it here.
 */
static __always_inline bool
pid_nr_in_server_ns(struct pid *pid, __u32 ns_ino, __u32 *nr)
{
	unsigned int level = BPF_CORE_READ(pid, level);
	struct upid *own;

	/* numbers[] is indexed by namespace level: the task's own is the last */
	own = (struct upid *) ((char *) pid + bpf_core_field_offset(struct pid, numbers)) + level;
	if (BPF_CORE_READ(own, ns, ns.inum) != ns_ino)
		return false;
	*nr = (__u32) BPF_CORE_READ(own, nr);
	return true;
}

/* A task's thread group ID as the server sees PIDs; false if it cannot see it. */
static __always_inline bool
task_tgid_as_server_sees_it(struct task_struct *task, __u32 *tgid)
{
	__u32		ns_ino = KNOB(pid_ns_ino);

	if (ns_ino == 0 || ns_ino == PCE_INIT_PID_NS_INO)
	{
		*tgid = (__u32) BPF_CORE_READ(task, tgid);
		return true;
	}
	return pid_nr_in_server_ns(BPF_CORE_READ(task, group_leader, thread_pid), ns_ino, tgid);
}

/* The current task's thread ID and thread group ID, as the server sees PIDs. */
static __always_inline bool
current_ids_as_server_sees_them(__u32 *tid, __u32 *tgid)
{
	__u32		ns_ino = KNOB(pid_ns_ino);
	struct task_struct *task;

	if (ns_ino == 0 || ns_ino == PCE_INIT_PID_NS_INO)
	{
		__u64		pid_tgid = bpf_get_current_pid_tgid();

		*tid = (__u32) pid_tgid;
		*tgid = (__u32) (pid_tgid >> 32);
		return true;
	}
	task = bpf_get_current_task_btf();
	return pid_nr_in_server_ns(BPF_CORE_READ(task, thread_pid), ns_ino, tid) &&
		pid_nr_in_server_ns(BPF_CORE_READ(task, group_leader, thread_pid), ns_ino, tgid);
}

/*
 * The uid of the cluster's account (the data directory's owner, --user),
 * written by the root loader into the object's read-only data before the
 * load; 0 (never set, or a tool that loads the object without a cluster):
 * no task passes current_task_is_cluster_account(), so the I/O-worker rule
 * is off, and files of every owner may be a scan's (mapping_of_cluster).
 * The loader never writes 0: it refuses root as the account.  Not a map:
 * the server's group can write every map.
 */
const volatile __u32 cluster_uid = 0;

/* mm->flags: the dumpable bits (MMF_DUMPABLE_MASK) and "dumpable by its owner" */
#define PCE_MMF_DUMPABLE_MASK	3UL
#define PCE_SUID_DUMP_USER		1UL

/*
 * Could the task's own account read its memory (ptrace, /proc/<pid>/mem)?
 * Not when it runs a setgid program or made itself undumpable: those are
 * kept from their account too, so the rule below must not read them.
 * mm->flags is an unsigned long up to 6.17 and a bitmap whose first word
 * holds the same bits from 6.18: its first word is read by offset.
 */
struct mm_struct___flags_word
{
	unsigned long flags;
}			__attribute__((preserve_access_index));

struct mm_struct___flags_bitmap
{
	struct
	{
		unsigned long __mm_flags[1];
	}			flags;
}			__attribute__((preserve_access_index));

static __always_inline bool
current_task_is_dumpable(struct task_struct *task)
{
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	unsigned long flags = 0;
	__u32		offset;

	/* which layout the running kernel has is a CO-RE check, as for folios */
	if (bpf_core_field_exists(struct mm_struct___flags_word, flags))
		offset = bpf_core_field_offset(struct mm_struct___flags_word, flags);
	else if (bpf_core_field_exists(struct mm_struct___flags_bitmap, flags))
		offset = bpf_core_field_offset(struct mm_struct___flags_bitmap, flags);
	else
		return false;
	if (!mm || bpf_probe_read_kernel(&flags, sizeof(flags), (char *) mm + offset) != 0)
		return false;
	return (flags & PCE_MMF_DUMPABLE_MASK) == PCE_SUID_DUMP_USER;
}

/*
 * Has the task's objective credential no permitted capability?
 * kernel_cap_t is two 32-bit words before 6.3 and one 64-bit word from
 * then on: 8 bytes either way, read by the field's offset.
 */
static __always_inline bool
task_has_no_capabilities(struct task_struct *task)
{
	const struct cred *cred = BPF_CORE_READ(task, real_cred);
	__u64		caps = ~0ULL;

	if (!cred || bpf_probe_read_kernel(&caps, sizeof(caps),
									   (char *) cred + bpf_core_field_offset(struct cred, cap_permitted)) != 0)
		return false;
	return caps == 0;
}

/*
 * Does the current task run as the cluster's account, with its real and
 * effective uid both?  The I/O-worker rule reads the memory of the task
 * that inserts a page at addresses taken from io_workers, which the
 * server's group may write: without this, a group member could register
 * any process (root's too) as an I/O worker and learn, from whether its
 * reads are attributed (folios_added_scan_by_io_worker, scan records), what
 * that process holds at chosen addresses.  So only a task the account could
 * read itself qualifies: its uids and gids its own, saved ones included (no
 * setgid program, no root process that took the account's uid and kept
 * root's as its saved one), dumpable, and with no permitted capability
 * (ptrace lets a tracer read only a task whose capabilities are a subset of
 * its own: a process that kept root's capabilities when it took the
 * account's uid, and made itself dumpable again, is not the account's to
 * read; PostgreSQL's processes have none).  The cluster's own processes
 * run as its account; the kernel's uids (kuid) are compared, as the loader
 * saw the owner from the initial user namespace.
 *
 * The task's objective credentials (real_cred) are compared, those ptrace
 * judges a target by, not the subjective ones (cred): the kernel overrides
 * those while it acts for the task.  overlayfs reads the real file below
 * with the mounter's credentials, so with them an I/O worker reading a
 * data directory on an overlay (a container's) never qualified, and no
 * page it read for a scan was the scan's (t/032).
 */
static __always_inline bool
current_task_is_cluster_account(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return cluster_uid != 0 &&
		BPF_CORE_READ(task, real_cred, uid.val) == cluster_uid &&
		BPF_CORE_READ(task, real_cred, euid.val) == cluster_uid &&
		BPF_CORE_READ(task, real_cred, suid.val) == cluster_uid &&
		BPF_CORE_READ(task, real_cred, egid.val) == BPF_CORE_READ(task, real_cred, gid.val) &&
		BPF_CORE_READ(task, real_cred, sgid.val) == BPF_CORE_READ(task, real_cred, gid.val) &&
		current_task_is_dumpable(task) &&
		task_has_no_capabilities(task);
}

/* The mark of the process with ProcNumber procno, and its key; NULL if unmarked. */
static __always_inline struct pce_scan_mark *
procno_mark(__s32 procno, __u32 *pid)
{
	__u32		key = (__u32) procno;
	const struct pce_scan_owner *owner = bpf_map_lookup_elem(&scan_owners, &key);
	struct pce_scan_mark *mark;

	if (!owner)
		return NULL;
	*pid = owner->pid;
	mark = bpf_map_lookup_elem(&scan_pids, pid);
	return mark && mark->proc_start_ticks == owner->proc_start_ticks ? mark : NULL;
}

/*
 * The I/O handle the I/O worker w is executing, found as the argument of
 * one of its innermost error contexts; 0 if none is a handle.
 */
static __always_inline __u64
io_worker_current_handle(const struct pce_io_worker *w)
{
	__u64		frame = 0,
				arg = 0,
				end = w->io_handles + (__u64) w->io_handle_count * w->io_handle_size;

	if (w->io_handle_size == 0 ||
		bpf_probe_read_user(&frame, sizeof(frame), (void *) w->error_context_stack) != 0)
		return 0;
	for (int depth = 0; depth < PCE_ERROR_CONTEXT_DEPTH && frame != 0; depth++)
	{
		if (bpf_probe_read_user(&arg, sizeof(arg), (void *) (frame + w->context_arg_offset)) != 0)
			return 0;
		if (arg >= w->io_handles && arg < end &&
			(arg - w->io_handles) % w->io_handle_size == 0)
			return arg;
		if (bpf_probe_read_user(&frame, sizeof(frame),
								(void *) (frame + w->context_previous_offset)) != 0)
			return 0;
	}
	return 0;
}

/*
 * The mark of the process whose I/O the current process, an I/O worker,
 * performs, and that process's key in scan_pids; NULL if none.  tgid is the current task's as the server sees it
 * (current_ids_as_server_sees_them: a task of another PID namespace never
 * gets here).  Nothing of the task's memory is read unless it runs as the
 * cluster's account (current_task_is_cluster_account: the namespace knob
 * alone is the server group's to write, so it bounds nothing).
 */
static __always_inline struct pce_scan_mark *
io_worker_owner_mark(__u32 tgid, __u32 *owner_pid)
{
	const struct pce_io_worker *w = bpf_map_lookup_elem(&io_workers, &tgid);
	__u64		handle;
	__s32		owner = -1;

	if (!w || !current_task_is_cluster_account() ||
		w->proc_start_ticks != current_process_start_ticks())
		return NULL;
	handle = io_worker_current_handle(w);
	if (handle == 0 ||
		bpf_probe_read_user(&owner, sizeof(owner), (void *) (handle + w->owner_offset)) != 0)
		return NULL;
	return procno_mark(owner, owner_pid);
}

/*
 * For whom is the current task reading (and is tracking switched on)?  The
 * mark found, its key in scan_pids and the kind of reader; NULL if the read
 * is no scan's.  with_io_workers: also ask whether an I/O worker performs a
 * marked process's I/O (which reads the worker's memory: callers on paths
 * every read takes may ask only where it can matter).
 */
static __always_inline struct pce_scan_mark *
current_reader_mark(enum pce_reader *reader, __u32 *key, bool with_io_workers)
{
	__u32		tid,
				tgid;
	struct pce_scan_mark *mark;

	*reader = PCE_READER_NONE;
	if (!KNOB(tracking) || !current_ids_as_server_sees_them(&tid, &tgid))
		return NULL;
	mark = bpf_map_lookup_elem(&scan_pids, &tgid);
	if (mark)
	{
		if (!task_matches_mark(mark))
			return NULL;
		*key = tgid;
		if (mark->reason == PCE_REASON_EXTERNAL)
			*reader = PCE_READER_EXTERNAL;
		else
			*reader = tid == tgid ? PCE_READER_SELF : PCE_READER_THREAD;
		return mark;
	}
	if (!with_io_workers || !KNOB(io_workers))
		return NULL;
	mark = io_worker_owner_mark(tgid, key);
	if (mark)
		*reader = PCE_READER_IO_WORKER;
	return mark;
}

/* The kind of reader the current task is (PCE_READER_NONE: no scan's). */
static __always_inline enum pce_reader
current_reader(void)
{
	enum pce_reader reader;
	__u32		key;

	(void) current_reader_mark(&reader, &key, true);
	return reader;
}

/*
 * Is the file behind mapping the cluster's, owned by its account?  Only
 * such a file is read for a scan: scan_pids is the server group's to
 * write, so a member could mark any process (root's too), and that
 * process's reads of its own files must reach neither the evictor's ring
 * (which file, which pages) nor the evict-first list.  Every file the
 * server and the trees it marks read for a scan (relations, WAL, temporary
 * files, a base backup's copy of the data directory) is the account's.
 * cluster_uid 0 (a test tool that loads without a cluster; the loader
 * refuses root as the account): files of every owner.
 */
static __always_inline bool
mapping_of_cluster(struct address_space *mapping)
{
	return cluster_uid == 0 || BPF_CORE_READ(mapping, host, i_uid.val) == cluster_uid;
}

/*
 * current_reader_mark() for a read of mapping's pages: a file that is not
 * the cluster's is no scan's, whoever reads it.
 */
static __always_inline struct pce_scan_mark *
file_reader_mark(struct address_space *mapping, enum pce_reader *reader, __u32 *key,
				 bool with_io_workers)
{
	struct pce_scan_mark *mark = current_reader_mark(reader, key, with_io_workers);

	if (mark && !mapping_of_cluster(mapping))
	{
		*reader = PCE_READER_NONE;
		return NULL;
	}
	return mark;
}

/* The kind of reader the current task is for a page of mapping. */
static __always_inline enum pce_reader
file_reader(struct address_space *mapping)
{
	enum pce_reader reader;
	__u32		key;

	(void) file_reader_mark(mapping, &reader, &key, true);
	return reader;
}

/* Is the current task reading for a scan? */
static __always_inline bool
current_task_is_scan(void)
{
	return current_reader() != PCE_READER_NONE;
}

/* Count an insertion by reader (both mechanisms count the same way). */
static __always_inline void
count_insertion(enum pce_reader reader)
{
	if (reader == PCE_READER_NONE)
	{
		stat_inc(PCE_STAT_FOLIOS_ADDED_OTHER);
		return;
	}
	stat_inc(PCE_STAT_FOLIOS_ADDED_SCAN);
	if (reader == PCE_READER_EXTERNAL)
		stat_inc(PCE_STAT_FOLIOS_ADDED_EXTERNAL);
	else if (reader == PCE_READER_IO_WORKER)
		stat_inc(PCE_STAT_FOLIOS_ADDED_SCAN_BY_IO_WORKER);
	else if (reader == PCE_READER_THREAD)
		stat_inc(PCE_STAT_FOLIOS_ADDED_SCAN_BY_IO_THREAD);
}

/* A task's start time in the ticks of /proc/<pid>/stat (field 22). */
static __always_inline __u64
task_start_ticks(struct task_struct *task)
{
	return BPF_CORE_READ(task, start_boottime) / PCE_NSEC_PER_USER_HZ_TICK;
}

/*
 * A new process whose parent carries an external mark gets a copy of it,
 * with its own start time: so a wrapped command's children and
 * grandchildren are marked from their first instruction, whenever they are
 * started.  A new thread needs nothing: its process's mark covers it (the
 * rule looks marks up by thread group).  Parent and child are keyed as
 * current_reader() looks them up: by thread group ID as the server sees
 * PIDs (so a wrapper inside the server's container works), and the
 * parent's mark is checked against its process's start time.  Marks of
 * other reasons are not copied: what a backend forks (archive_command,
 * COPY ... PROGRAM) is not its scan.  Runs in the parent's context
 * (sched_process_fork), after the child's PID and start time are set.
 */
static __always_inline void
inherit_external_mark(struct task_struct *parent, struct task_struct *child)
{
	__u32		parent_tgid,
				child_tgid;
	struct pce_scan_mark *mark;
	struct pce_scan_mark copy;

	if (BPF_CORE_READ(child, group_leader) != child)
		return;					/* a thread: its process is marked */
	if (!task_tgid_as_server_sees_it(parent, &parent_tgid) ||
		!task_tgid_as_server_sees_it(child, &child_tgid))
		return;
	mark = bpf_map_lookup_elem(&scan_pids, &parent_tgid);
	if (!mark || mark->reason != PCE_REASON_EXTERNAL)
		return;
	if (mark->proc_start_ticks != task_start_ticks(BPF_CORE_READ(parent, group_leader)))
		return;					/* a stale mark of a reused PID */
	copy = *mark;
	copy.proc_start_ticks = task_start_ticks(child);
	if (bpf_map_update_elem(&scan_pids, &child_tgid, &copy, BPF_ANY) == 0)
		stat_inc(PCE_STAT_MARKS_INHERITED);
}

#endif							/* PCE_MAPS_BPF_H */
