/*
 * pce_fake_io_worker.c
 *		Test tool: register this process as an I/O worker of a cluster, with
 *		addresses of its own memory that the I/O-worker rule (maps.bpf.h)
 *		matches, the way a member of the pins' group could register any
 *		process; then read a file and print how the tracker counted it.
 *
 *	pce_fake_io_worker PIN_DIR FILE [REGISTRAR]
 *
 * In its own memory it lays out what a PostgreSQL 18 I/O worker has while
 * it performs an I/O: error_context_stack points to a callback whose
 * argument is an I/O handle, and the handle holds the ProcNumber of a
 * marked process.  A child that only waits stands for that marked process
 * (scan_pids, scan_owners).  FILE is dropped from the page cache, read
 * once, and the tool prints
 *		scan <n> by_io_worker <n>
 * the growth of folios_added_scan and folios_added_scan_by_io_worker during
 * the read.  Every entry it wrote is removed again (the knob io_workers is
 * restored).
 *
 * With REGISTRAR (a user name; the tool must run as root then, through
 * test/root-helper), the map entries are written by a child running as
 * that user, not by root: a group member registering a root process.  FILE
 * must then belong to REGISTRAR.
 *
 * With keep-caps after REGISTRAR, the tool itself becomes REGISTRAR (every
 * uid and gid) but keeps root's permitted capabilities, and makes itself
 * dumpable again: a process the rule's uid and dumpable checks pass, that
 * ptrace would still not let REGISTRAR read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pg_cache_ext.h"
#include "pce_proc_stat.h"

#define FAKE_PROCNO			77	/* the marked process's ProcNumber */
#define FAKE_HANDLES		4
#define FAKE_HANDLE_SIZE	64
#define FAKE_OWNER_OFFSET	8
#define POSTGRES_EPOCH_UNIX	946684800LL	/* 2000-01-01, PostgreSQL's timestamps */

/* PostgreSQL's ErrorContextCallback */
struct fake_error_context
{
	struct fake_error_context *previous;
	void		(*callback) (void *arg);
	void	   *arg;
};

/* what the rule reads: volatile, so that the stores are not optimised away */
static volatile struct fake_error_context fake_frame;
static struct fake_error_context *volatile fake_error_context_stack;
static char fake_handles[FAKE_HANDLES][FAKE_HANDLE_SIZE] __attribute__((aligned(64)));

static const char *pin_dir;
static pid_t marked_pid;
static pid_t reader_pid;		/* this process: the registrar is a child */
static __u32 saved_io_workers_knob;

static int
map_fd(const char *name)
{
	char		path[4096];
	int			fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
	{
		fprintf(stderr, "pce_fake_io_worker: cannot open %s: %s\n", path, strerror(errno));
		exit(1);
	}
	return fd;
}

static void
must(int rc, const char *what)
{
	if (rc != 0)
	{
		fprintf(stderr, "pce_fake_io_worker: %s: %s\n", what, strerror(errno));
		exit(1);
	}
}

/* This process's io_workers entry: where its fake I/O handle is. */
static void
put_io_worker_entry(int fd)
{
	__u32		key = (__u32) reader_pid;
	struct pce_io_worker w = {0};

	w.proc_start_ticks = pce_proc_start_ticks(reader_pid);
	w.error_context_stack = (__u64) (unsigned long) &fake_error_context_stack;
	w.io_handles = (__u64) (unsigned long) fake_handles;
	w.io_handle_count = FAKE_HANDLES;
	w.io_handle_size = FAKE_HANDLE_SIZE;
	w.owner_offset = FAKE_OWNER_OFFSET;
	w.context_arg_offset = offsetof(struct fake_error_context, arg);
	w.context_previous_offset = offsetof(struct fake_error_context, previous);
	must(bpf_map_update_elem(fd, &key, &w, BPF_ANY), "io_workers");
}

/*
 * On 18+ the module's worker keeps io_workers to the server's own I/O
 * workers, removing other entries every 250 ms: put this one back, every
 * 2 ms, until killed.
 */
static void
keep_io_worker_entry(void)
{
	int			fd = map_fd(PCE_PIN_IO_WORKERS);

	for (;;)
	{
		put_io_worker_entry(fd);
		usleep(2000);
	}
}

/* The marked process's entries, this process's io_workers entry, the knob. */
static void
register_entries(void)
{
	__u32		mpid = (__u32) marked_pid,
				procno = FAKE_PROCNO,
				key = 0;
	struct pce_scan_mark mark = {0};
	struct pce_scan_owner owner = {0};
	struct pce_knobs k;
	struct timespec now;
	int			knobs = map_fd(PCE_PIN_KNOBS);

	clock_gettime(CLOCK_REALTIME, &now);
	mark.proc_start_ticks = pce_proc_start_ticks(marked_pid);
	mark.marked_at_us = (now.tv_sec - POSTGRES_EPOCH_UNIX) * 1000000LL + now.tv_nsec / 1000;
	mark.reason = PCE_REASON_SEQSCAN;
	must(bpf_map_update_elem(map_fd(PCE_PIN_SCAN_PIDS), &mpid, &mark, BPF_ANY), "scan_pids");
	owner.proc_start_ticks = mark.proc_start_ticks;
	owner.pid = mpid;
	must(bpf_map_update_elem(map_fd(PCE_PIN_SCAN_OWNERS), &procno, &owner, BPF_ANY), "scan_owners");
	put_io_worker_entry(map_fd(PCE_PIN_IO_WORKERS));
	must(bpf_map_lookup_elem(knobs, &key, &k), "knobs");
	k.io_workers = 1;
	must(bpf_map_update_elem(knobs, &key, &k, BPF_ANY), "knobs");
}

static void
remove_entries(void)
{
	__u32		mpid = (__u32) marked_pid,
				procno = FAKE_PROCNO,
				self = (__u32) reader_pid,
				key = 0;
	struct pce_knobs k;
	int			knobs = map_fd(PCE_PIN_KNOBS);

	bpf_map_delete_elem(map_fd(PCE_PIN_IO_WORKERS), &self);
	bpf_map_delete_elem(map_fd(PCE_PIN_SCAN_OWNERS), &procno);
	bpf_map_delete_elem(map_fd(PCE_PIN_SCAN_PIDS), &mpid);
	if (bpf_map_lookup_elem(knobs, &key, &k) == 0)
	{
		k.io_workers = saved_io_workers_knob;
		bpf_map_update_elem(knobs, &key, &k, BPF_ANY);
	}
}

/* Start fn in a child, as registrar when given (else as this process's user). */
static pid_t
start_as_registrar(const struct passwd *registrar, void (*fn) (void))
{
	pid_t		child = fork();

	if (child < 0)
		must(-1, "fork");
	if (child == 0)
	{
		if (registrar &&
			(initgroups(registrar->pw_name, registrar->pw_gid) != 0 ||
			 setgid(registrar->pw_gid) != 0 || setuid(registrar->pw_uid) != 0))
			must(-1, "dropping to the registrar");
		fn();
		exit(0);
	}
	return child;
}

/*
 * Become registrar, every uid and gid, keeping the permitted capabilities
 * (root's) that a change of uid clears, and dumpable again (a change of
 * uid clears that too).
 */
static void
become_keeping_capabilities(const struct passwd *registrar)
{
	gid_t		gid = registrar->pw_gid;
	uid_t		uid = registrar->pw_uid;

	must(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), "PR_SET_KEEPCAPS");
	must(initgroups(registrar->pw_name, gid), "initgroups");
	must(setresgid(gid, gid, gid), "setresgid");
	must(setresuid(uid, uid, uid), "setresuid");
	must(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "PR_SET_DUMPABLE");
}

/* Run fn so, and wait for it. */
static void
as_registrar(const struct passwd *registrar, void (*fn) (void))
{
	pid_t		child = start_as_registrar(registrar, fn);
	int			status;

	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
	{
		fprintf(stderr, "pce_fake_io_worker: the registrar failed\n");
		exit(1);
	}
}

/* counter which of the stats map, summed over the CPUs */
static __u64
stat_sum(int stats, __u32 which)
{
	int			ncpu = libbpf_num_possible_cpus();
	__u64	   *per_cpu = calloc(ncpu, sizeof(__u64)),
				sum = 0;

	if (!per_cpu || bpf_map_lookup_elem(stats, &which, per_cpu) != 0)
		must(-1, "stats");
	for (int i = 0; i < ncpu; i++)
		sum += per_cpu[i];
	free(per_cpu);
	return sum;
}

/* Drop file from the page cache and read it once. */
static void
read_uncached(int fd)
{
	char		buf[1 << 16];
	off_t		off = 0;
	ssize_t		n;

	fsync(fd);
	must(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), "posix_fadvise");
	while ((n = pread(fd, buf, sizeof(buf), off)) > 0)
		off += n;
}

int
main(int argc, char **argv)
{
	const struct passwd *registrar = NULL;
	int			stats,
				fd;
	struct stat st;
	struct pce_knobs k;
	__u32		key = 0;
	__u64		scan,
				by_worker;
	pid_t		keeper;

	if (argc < 3 || argc > 5 || (argc == 5 && strcmp(argv[4], "keep-caps") != 0))
	{
		fprintf(stderr, "usage: pce_fake_io_worker PIN_DIR FILE [REGISTRAR [keep-caps]]\n");
		return 2;
	}
	pin_dir = argv[1];
	if (argc >= 4 && (geteuid() != 0 || !(registrar = getpwnam(argv[3])) || registrar->pw_uid == 0))
	{
		fprintf(stderr, "pce_fake_io_worker: REGISTRAR must be a user other than root, and the tool run as root\n");
		return 2;
	}
	fd = open(argv[2], O_RDONLY | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
		(registrar && st.st_uid != registrar->pw_uid))
	{
		fprintf(stderr, "pce_fake_io_worker: %s: not a regular file of the registrar's\n", argv[2]);
		return 1;
	}
	if (argc == 5)
	{
		become_keeping_capabilities(registrar);
		registrar = NULL;		/* the children are the registrar already */
	}
	stats = map_fd(PCE_PIN_STATS);
	must(bpf_map_lookup_elem(map_fd(PCE_PIN_KNOBS), &key, &k), "knobs");
	saved_io_workers_knob = k.io_workers;

	*(__s32 *) (fake_handles[1] + FAKE_OWNER_OFFSET) = FAKE_PROCNO;
	fake_frame.arg = fake_handles[1];
	fake_error_context_stack = (struct fake_error_context *) &fake_frame;

	reader_pid = getpid();
	marked_pid = fork();
	if (marked_pid == 0)
	{
		pause();
		_exit(0);
	}
	usleep(10000);				/* its start time is in /proc */
	as_registrar(registrar, register_entries);
	keeper = start_as_registrar(registrar, keep_io_worker_entry);
	scan = stat_sum(stats, PCE_STAT_FOLIOS_ADDED_SCAN);
	by_worker = stat_sum(stats, PCE_STAT_FOLIOS_ADDED_SCAN_BY_IO_WORKER);
	read_uncached(fd);
	scan = stat_sum(stats, PCE_STAT_FOLIOS_ADDED_SCAN) - scan;
	by_worker = stat_sum(stats, PCE_STAT_FOLIOS_ADDED_SCAN_BY_IO_WORKER) - by_worker;
	fake_error_context_stack = NULL;
	kill(keeper, SIGKILL);
	waitpid(keeper, NULL, 0);
	as_registrar(registrar, remove_entries);
	kill(marked_pid, SIGKILL);
	waitpid(marked_pid, NULL, 0);
	printf("scan %llu by_io_worker %llu\n", (unsigned long long) scan, (unsigned long long) by_worker);
	return 0;
}
