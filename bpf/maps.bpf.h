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
 * Is the current task the process that was marked, and not a later one that
 * got the same PID after the marked one died without unmarking?  The mark
 * holds the start time as /proc/<pid>/stat shows it: start_boottime in
 * clock ticks (USER_HZ, 100 on every architecture we build for).
 */
#define PCE_NSEC_PER_USER_HZ_TICK	10000000ULL

static __always_inline bool
task_matches_mark(const struct pce_scan_mark *mark)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64		ticks = BPF_CORE_READ(task, start_boottime) / PCE_NSEC_PER_USER_HZ_TICK;

	/* 0: marked by a tool that did not know the start time */
	return mark->proc_start_ticks == 0 || mark->proc_start_ticks == ticks;
}

/*
 * The current task's thread ID as the server sees PIDs.  The server puts
 * its own PIDs (MyProcPid) in the map, and a server in a container has a PID
 * namespace of its own: there the same process is, say, 57 to itself and
 * 81234 to bpf_get_current_pid_tgid().  The module writes the inode number
 * of its PID namespace into the knobs (pid_ns_ino); a task whose own PID
 * namespace (the last level of its struct pid) is another one is not one of
 * the server's processes.  bpf_get_ns_current_pid_tgid() does the same, but
 * the cache_ext policy (struct_ops, 6.6) may not call it, while both may
 * read the current task; so the tracker and the policy read it here.
 */
static __always_inline bool
current_tid_as_server_sees_it(__u32 *tid)
{
	__u32		ns_ino = KNOB(pid_ns_ino);
	struct task_struct *task;
	struct pid *pid;
	struct upid *own;
	unsigned int level;

	if (ns_ino == 0 || ns_ino == PCE_INIT_PID_NS_INO)
	{
		*tid = (__u32) bpf_get_current_pid_tgid();
		return true;
	}
	task = bpf_get_current_task_btf();
	pid = BPF_CORE_READ(task, thread_pid);
	level = BPF_CORE_READ(pid, level);
	/* numbers[] is indexed by namespace level: the task's own is the last */
	own = (struct upid *) ((char *) pid + bpf_core_field_offset(struct pid, numbers)) + level;
	if (BPF_CORE_READ(own, ns, ns.inum) != ns_ino)
		return false;
	*tid = (__u32) BPF_CORE_READ(own, nr);
	return true;
}

/* Is the current task marked as scanning (and is tracking switched on)? */
static __always_inline bool
current_task_is_scan(void)
{
	__u32		tid;
	struct pce_scan_mark *mark;

	if (!KNOB(tracking) || !current_tid_as_server_sees_it(&tid))
		return false;
	mark = bpf_map_lookup_elem(&scan_pids, &tid);
	if (!mark)
		return false;
	return task_matches_mark(mark);
}

/* The current task's mark, when it is a live mark of an external tree. */
static __always_inline bool
current_task_is_external(void)
{
	__u32		tid = (__u32) bpf_get_current_pid_tgid();
	struct pce_scan_mark *mark = bpf_map_lookup_elem(&scan_pids, &tid);

	return mark && mark->reason == PCE_REASON_EXTERNAL && task_matches_mark(mark);
}

/* A task's start time in the ticks of /proc/<pid>/stat (field 22). */
static __always_inline __u64
task_start_ticks(struct task_struct *task)
{
	return BPF_CORE_READ(task, start_boottime) / PCE_NSEC_PER_USER_HZ_TICK;
}

/*
 * A new task (process or thread) whose parent carries an external mark
 * gets a copy of it, with its own start time: so a wrapped command's
 * children, grandchildren and threads are marked from their first
 * instruction, whenever they are started.  Marks of other reasons are not
 * copied: what a backend forks (archive_command, COPY ... PROGRAM) is not
 * its scan.  Runs in the parent's context (sched_process_fork), after the
 * child's start time is set.
 */
static __always_inline void
inherit_external_mark(struct task_struct *parent, struct task_struct *child)
{
	__u32		parent_tid = BPF_CORE_READ(parent, pid);
	__u32		child_tid = BPF_CORE_READ(child, pid);
	struct pce_scan_mark *mark = bpf_map_lookup_elem(&scan_pids, &parent_tid);
	struct pce_scan_mark copy;

	if (!mark || mark->reason != PCE_REASON_EXTERNAL)
		return;
	if (mark->proc_start_ticks != task_start_ticks(parent))
		return;					/* a stale mark of a reused PID */
	copy = *mark;
	copy.proc_start_ticks = task_start_ticks(child);
	if (bpf_map_update_elem(&scan_pids, &child_tid, &copy, BPF_ANY) == 0)
		stat_inc(PCE_STAT_MARKS_INHERITED);
}

#endif							/* PCE_MAPS_BPF_H */
