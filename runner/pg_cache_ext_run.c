/*
 * pg_cache_ext_run.c
 *		Run a command as a scanner of one cluster: a backup (pgBackRest,
 *		wal-g, Barman's rsync, tar) or any other reader of the data directory
 *		from outside the server.
 *
 *	pg_cache_ext_run -D DATADIR [--bpffs-dir DIR] [--require] [-q] -- COMMAND [ARG...]
 *
 * The wrapper puts its own PID into the cluster's scan-PID map with reason
 * "external", naming itself as the root of the tree, then runs COMMAND.
 * The tracker's program on process fork (bpf/tracker.bpf.c) copies the mark
 * to every task the tree starts, threads included, each with its own start
 * time; so the whole tree's page-cache insertions are scan traffic: the
 * stock mechanism drops them beyond the budget, the cache_ext policy puts
 * them on its scan list.  Pages already cached when the tree reads them
 * stay, and pages of files outside the data directory are left alone (the
 * evictor only resolves files of the data directory).
 *
 * When COMMAND ends, however it ends, the wrapper removes every mark of its
 * tree and exits with COMMAND's status (or dies of its signal).  SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed on to COMMAND.
 * If the wrapper itself is killed (SIGKILL), the server's background
 * worker removes the marks whose root is gone.
 *
 * It needs no privileges: it runs as the cluster's OS user (or a member of
 * its group) and uses the pins the root loader made, checked with the
 * server's own rule (bpf/pce_pin_trust.h, bpf/pce_paths.h).  When the pins
 * cannot be used, it says why and runs COMMAND unprotected, unless
 * --require is given: a backup matters more than the cache.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/types.h>

#include <bpf/bpf.h>

#include "pg_cache_ext.h"
#include "pce_paths.h"
#include "pce_pin_trust.h"
#include "pce_proc_stat.h"

/* exit status when the wrapper itself fails (as env(1) and timeout(1) do) */
#define RUN_FAILED			125
/* seconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01 */
#define PG_EPOCH_OFFSET		946684800ULL

static struct
{
	const char *datadir;
	const char *bpffs_dir;
	bool		require;
	bool		quiet;
	char	  **command;
}			opt = {NULL, PCE_DEFAULT_BPFFS_DIR, false, false, NULL};

/* what the tree is marked with, once marked */
static int	scan_pids_fd = -1;
static struct pce_scan_mark root_mark;
static volatile sig_atomic_t child_pid = 0;

static void
usage(FILE *out)
{
	fprintf(out,
			"pg_cache_ext_run runs a command, and every process it starts, as a scanner of a\n"
			"PostgreSQL cluster: the pages it brings into the page cache go first.\n\n"
			"Usage: pg_cache_ext_run -D DATADIR [OPTION]... -- COMMAND [ARG]...\n\n"
			"  -D, --pgdata DATADIR   the cluster's data directory (its pins are used)\n"
			"      --bpffs-dir DIR    the loader's pin root (default %s)\n"
			"      --require          fail (status %d) instead of running unprotected\n"
			"  -q, --quiet            no warnings\n"
			"  -h, --help             this text\n",
			PCE_DEFAULT_BPFFS_DIR, RUN_FAILED);
}

static void
fail(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "pg_cache_ext_run: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(RUN_FAILED);
}

static void
warn(const char *fmt,...)
{
	va_list		ap;

	if (opt.quiet)
		return;
	fprintf(stderr, "pg_cache_ext_run: warning: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"pgdata", required_argument, NULL, 'D'},
		{"bpffs-dir", required_argument, NULL, 'b'},
		{"require", no_argument, NULL, 'r'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	int			c;
	const char *problem;

	/* "+": options end at COMMAND, whose own options are its own */
	while ((c = getopt_long(argc, argv, "+D:qh", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'D':
				opt.datadir = optarg;
				break;
			case 'b':
				opt.bpffs_dir = optarg;
				break;
			case 'r':
				opt.require = true;
				break;
			case 'q':
				opt.quiet = true;
				break;
			case 'h':
				usage(stdout);
				exit(0);
			default:
				usage(stderr);
				exit(RUN_FAILED);
		}
	}
	if (!opt.datadir)
		opt.datadir = getenv("PGDATA");
	if (!opt.datadir || !opt.datadir[0])
		fail("no data directory: give -D DATADIR (or set PGDATA)");
	if (optind >= argc)
		fail("no command to run: pg_cache_ext_run -D DATADIR -- COMMAND [ARG]...");
	opt.command = argv + optind;
	if ((problem = pce_path_problem(opt.bpffs_dir)) != NULL)
		fail("--bpffs-dir \"%s\" is refused: %s", opt.bpffs_dir, problem);
}

/*
 * The cluster's id (the system identifier at the start of global/pg_control,
 * which names its pin directory) and the group the server runs in (the
 * data directory owner's primary group, whose members the pins admit).
 */
static void
read_cluster(uint64_t *sysid, gid_t *server_gid, struct stat *datadir_st)
{
	char		path[PATH_MAX];
	struct stat st;
	struct passwd *pw;
	int			fd;

	if (stat(opt.datadir, &st) != 0 || !S_ISDIR(st.st_mode))
		fail("\"%s\" is not a directory: %s", opt.datadir, errno ? strerror(errno) : "not a directory");
	pw = getpwuid(st.st_uid);
	*server_gid = pw ? pw->pw_gid : st.st_gid;
	snprintf(path, sizeof(path), "%s/global/pg_control", opt.datadir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		fail("cannot open \"%s\": %s (is -D a PostgreSQL data directory, readable by this user?)",
			 path, strerror(errno));
	if (read(fd, sysid, sizeof(*sysid)) != sizeof(*sysid))
		fail("cannot read the system identifier from \"%s\"", path);
	close(fd);
	*datadir_st = st;
}

/*
 * Open pin name below the directory dfd as the server does: O_PATH without
 * following a symlink, and the trust rule on that very inode.  Returns the
 * O_PATH descriptor, or -1 with why filled.
 */
static int
open_checked_pin(int dfd, const char *dir, const char *name, gid_t gid, char *why, size_t whylen)
{
	struct stat st;
	int			pfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (pfd < 0 || fstat(pfd, &st) != 0)
	{
		int			save_errno = errno;

		snprintf(why, whylen, "cannot open %s/%s: %s (rerun pg_cache_ext_loader)", dir, name, strerror(errno));
		if (pfd >= 0)
			close(pfd);
		errno = save_errno;
		return -1;
	}
	if (!pce_pin_trusted(&st, gid))
	{
		snprintf(why, whylen, "refusing %s/%s: pins must be owned by root, give other users nothing "
				 "and give access only to the server's group (gid %u); rerun pg_cache_ext_loader",
				 dir, name, (unsigned) gid);
		close(pfd);
		return -1;
	}
	return pfd;
}

/* The BPF object of a checked pin, taken through /proc/self/fd; -1 with why. */
static int
open_trusted_pin(int dfd, const char *dir, const char *name, gid_t gid, char *why, size_t whylen)
{
	char		proc_path[64];
	int			pfd = open_checked_pin(dfd, dir, name, gid, why, whylen);
	int			fd;

	if (pfd < 0)
		return -1;
	snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", pfd);
	fd = bpf_obj_get(proc_path);
	if (fd < 0)
		snprintf(why, whylen, "cannot open %s/%s: %s (is this user the cluster's owner, or in its group?)",
				 dir, name, strerror(errno));
	close(pfd);
	return fd;
}

/* The pin directory, checked like the server checks it; -1 with why. */
static int
open_pin_dir(const char *dir, gid_t gid, char *why, size_t whylen)
{
	struct stat st;
	int			dfd = open(dir, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (dfd < 0)
	{
		snprintf(why, whylen, "cannot open the pin directory %s: %s (has pg_cache_ext_loader run "
				 "for this cluster?)", dir, strerror(errno));
		return -1;
	}
	if (fstat(dfd, &st) != 0 || !pce_pin_dir_trusted(&st, gid))
	{
		snprintf(why, whylen, "refusing %s: the pin directory must be a directory owned by root "
				 "that only root can change", dir);
		close(dfd);
		return -1;
	}
	return dfd;
}

/* Do the pinned maps speak this wrapper's layout, and is the tracker in? */
static bool
pins_usable(int dfd, const char *dir, gid_t gid, struct pce_loader_info *li, char *why, size_t whylen)
{
	struct bpf_map_info info;
	__u32		len = sizeof(info);
	__u32		key = 0;
	int			info_fd = open_trusted_pin(dfd, dir, PCE_PIN_LOADER_INFO, gid, why, whylen);
	int			fork_fd;

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(scan_pids_fd, &info, &len) != 0 ||
		info.value_size != sizeof(struct pce_scan_mark))
	{
		snprintf(why, whylen, "the maps in %s have another layout than this program's (ABI %d): "
				 "run the loader of this version", dir, PCE_ABI_VERSION);
		return false;
	}
	if (info_fd < 0)
		return false;
	if (bpf_map_lookup_elem(info_fd, &key, li) != 0 || li->abi_version != PCE_ABI_VERSION ||
		li->mechanism == PCE_MECH_NONE)
	{
		snprintf(why, whylen, "the loader's maps in %s are of another version, or nothing is "
				 "loaded: rerun pg_cache_ext_loader", dir);
		close(info_fd);
		return false;
	}
	close(info_fd);
	li->cgroup[sizeof(li->cgroup) - 1] = '\0';
	/* root's alone (0600): only there and sound, as the server checks links */
	fork_fd = open_checked_pin(dfd, dir, PCE_PIN_TRACKER_FORK_LINK, gid, why, whylen);
	if (fork_fd < 0)
	{
		if (errno == ENOENT)
			snprintf(why, whylen, "%s/%s is missing: the loader predates pg_cache_ext_run, so the "
					 "command's children would not be marked (rerun pg_cache_ext_loader)",
					 dir, PCE_PIN_TRACKER_FORK_LINK);
		return false;
	}
	close(fork_fd);
	return true;
}

/*
 * Open the cluster's scan-PID map; false with why set if the pins are
 * missing, untrusted or of another version.
 */
static bool
open_scan_map(struct pce_loader_info *li, char *why, size_t whylen)
{
	uint64_t	sysid;
	gid_t		gid;
	struct stat datadir_st;
	char		name[PCE_CLUSTER_DIR_NAME_MAX];
	char		dir[PATH_MAX];
	int			dfd;
	bool		ok;

	/* the pin directory's name: the server's and the loader's rule */
	read_cluster(&sysid, &gid, &datadir_st);
	pce_cluster_dir_name(name, sysid, datadir_st.st_dev, datadir_st.st_ino);
	snprintf(dir, sizeof(dir), "%s/%s", opt.bpffs_dir, name);
	dfd = open_pin_dir(dir, gid, why, whylen);
	if (dfd < 0)
		return false;
	scan_pids_fd = open_trusted_pin(dfd, dir, PCE_PIN_SCAN_PIDS, gid, why, whylen);
	ok = scan_pids_fd >= 0 && pins_usable(dfd, dir, gid, li, why, whylen);
	close(dfd);
	if (!ok && scan_pids_fd >= 0)
	{
		close(scan_pids_fd);
		scan_pids_fd = -1;
	}
	return ok;
}

/* openat2(2): glibc 2.36 has no wrapper; -1 with errno (ENOSYS before 5.6) */
static int
run_openat2(int dirfd, const char *path, int flags, unsigned long long resolve)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (unsigned long long) (flags | O_CLOEXEC);
	how.resolve = resolve;
	return (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* Now as a PostgreSQL timestamp (microseconds since 2000-01-01). */
static __u64
pg_now_us(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return ((__u64) tv.tv_sec - PG_EPOCH_OFFSET) * 1000000ULL + (__u64) tv.tv_usec;
}

/* Mark this process as the root of an external tree; false with why. */
static bool
mark_root(char *why, size_t whylen)
{
	__u32		self = (__u32) getpid();

	memset(&root_mark, 0, sizeof(root_mark));
	root_mark.proc_start_ticks = pce_proc_start_ticks((int) self);
	root_mark.marked_at_us = pg_now_us();
	root_mark.reason = PCE_REASON_EXTERNAL;
	root_mark.root_pid = self;
	root_mark.root_start_ticks = root_mark.proc_start_ticks;
	if (root_mark.proc_start_ticks == 0)
	{
		snprintf(why, whylen, "cannot read this process's start time from /proc");
		return false;
	}
	if (bpf_map_update_elem(scan_pids_fd, &self, &root_mark, BPF_ANY) != 0)
	{
		snprintf(why, whylen, "cannot mark this process: %s%s", strerror(errno),
				 errno == E2BIG ? " (the scan-PID map is full)" : "");
		return false;
	}
	return true;
}

/* Is this mark one of our tree's? */
static bool
mark_of_tree(const struct pce_scan_mark *mark)
{
	return mark->reason == PCE_REASON_EXTERNAL && mark->root_pid == root_mark.root_pid &&
		mark->root_start_ticks == root_mark.root_start_ticks;
}

/*
 * Remove every mark of the tree: ours, the command's, and those of any
 * descendant still running (a daemon it left behind is no longer a scan).
 * Keys are collected first: deleting while walking would restart the walk.
 */
static void
unmark_tree(void)
{
	static __u32 keys[PCE_MAX_SCAN_PIDS];
	int			n = 0;
	__u32		key,
				next,
			   *prev = NULL;

	if (scan_pids_fd < 0)
		return;
	while (n < PCE_MAX_SCAN_PIDS && bpf_map_get_next_key(scan_pids_fd, prev, &next) == 0)
	{
		struct pce_scan_mark mark;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(scan_pids_fd, &key, &mark) == 0 && mark_of_tree(&mark))
			keys[n++] = key;
	}
	for (int i = 0; i < n; i++)
		bpf_map_delete_elem(scan_pids_fd, &keys[i]);
}

/* Was the command marked at its fork?  If not, the fork program is not there. */
static void
check_child_marked(pid_t pid)
{
	struct pce_scan_mark mark;
	__u32		key = (__u32) pid;

	if (bpf_map_lookup_elem(scan_pids_fd, &key, &mark) != 0 || !mark_of_tree(&mark))
		warn("the command (pid %d) was not marked at its fork: is the tracker's fork program "
			 "attached? (rerun pg_cache_ext_loader)", (int) pid);
}

/* where cgroup v2 is mounted; the loader names a cgroup below it */
#define CGROUP_ROOT			"/sys/fs/cgroup"

/*
 * Open the cgroup directory li->cgroup names, and nothing else: the name
 * comes from loader_info, which the cluster's group can write, so it is
 * resolved below an fd of CGROUP_ROOT, following no symlink (nor "..",
 * nor /proc magic links), and what was opened must be a cgroup v2
 * directory.  Returns its fd, or -1 with why filled.
 */
static int
open_policy_cgroup(const char *cgroup, char *why, size_t whylen)
{
	size_t		rootlen = strlen(CGROUP_ROOT);
	struct statfs fs;
	int			rootfd,
				fd;

	if (strncmp(cgroup, CGROUP_ROOT "/", rootlen + 1) != 0)
	{
		snprintf(why, whylen, "it is not below %s", CGROUP_ROOT);
		return -1;
	}
	rootfd = run_openat2(AT_FDCWD, CGROUP_ROOT, O_PATH | O_DIRECTORY,
						 RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	fd = rootfd < 0 ? -1 :
		run_openat2(rootfd, cgroup + rootlen + 1, O_PATH | O_DIRECTORY | O_NOFOLLOW,
					RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	if (fd < 0)
		snprintf(why, whylen, "%s", errno == ELOOP ? "it goes through a symbolic link" :
				 errno == EXDEV ? "it leads outside " CGROUP_ROOT : strerror(errno));
	else if (fstatfs(fd, &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC)
	{
		snprintf(why, whylen, "it is not a cgroup v2 directory");
		close(fd);
		fd = -1;
	}
	if (rootfd >= 0)
		close(rootfd);
	return fd;
}

/*
 * Under cache_ext the policy sees only the page cache of the cluster's
 * cgroup: a reader elsewhere is charged to its own cgroup and its pages
 * never reach the policy's scan list.  Join the cluster's cgroup when this
 * user may (a delegated cgroup); else say so.  Not as root: the cgroup's
 * name is the cluster group's to write, and root needs no protection from
 * the wrapper (run it as the cluster's OS user).
 */
static void
join_policy_cgroup(const struct pce_loader_info *li)
{
	char		why[256];
	int			dfd,
				fd = -1;

	if (li->mechanism != PCE_MECH_CACHE_EXT || li->cgroup[0] == '\0')
		return;
	if (geteuid() == 0)
	{
		warn("running as root: the cluster's cgroup %s, named in a map the cluster's group can "
			 "write, is not joined; run this as the cluster's OS user (runuser -u postgres -- ...)",
			 li->cgroup);
		return;
	}
	dfd = open_policy_cgroup(li->cgroup, why, sizeof(why));
	if (dfd < 0)
	{
		warn("refusing the cluster's cgroup \"%s\" from loader_info: %s", li->cgroup, why);
		return;
	}
	fd = openat(dfd, "cgroup.procs", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd >= 0 && dprintf(fd, "%d\n", (int) getpid()) > 0)
	{
		close(fd);
		return;
	}
	if (fd >= 0)
		close(fd);
	warn("cannot join the cluster's cgroup %s (%s): the cache_ext policy sees only pages read "
		 "in that cgroup, so run this command there (see README, \"Backups and other readers\")",
		 li->cgroup, strerror(errno));
}

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

#define N_FORWARDED (sizeof(forwarded_signals) / sizeof(forwarded_signals[0]))

static void
forward_signal(int sig)
{
	if (child_pid > 0)
		kill(child_pid, sig);
}

/* Pass the forwarded signals on to the command (or restore them in it). */
static void
set_forwarding(bool on)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on ? forward_signal : SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaction(forwarded_signals[i], &sa, NULL);
}

/*
 * Start the command and wait for it.  Signals are blocked across fork(),
 * so that one arriving before child_pid is set is forwarded once it is.
 * Returns its wait status, or -1 if it could not be started.
 */
static int
run_command(void)
{
	sigset_t	block,
				old;
	pid_t		pid;
	int			status;

	sigemptyset(&block);
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaddset(&block, forwarded_signals[i]);
	set_forwarding(true);
	sigprocmask(SIG_BLOCK, &block, &old);
	pid = fork();
	if (pid == 0)
	{
		set_forwarding(false);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(opt.command[0], opt.command);
		fprintf(stderr, "pg_cache_ext_run: cannot run \"%s\": %s\n", opt.command[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (pid < 0)
	{
		sigprocmask(SIG_SETMASK, &old, NULL);
		fprintf(stderr, "pg_cache_ext_run: error: cannot fork: %s\n", strerror(errno));
		return -1;
	}
	child_pid = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (scan_pids_fd >= 0)
		check_child_marked(pid);
	while (waitpid(pid, &status, 0) < 0)
	{
		if (errno != EINTR)
			return -1;
	}
	return status;
}

/* Exit as the command did: its status, or its signal (after unmarking). */
static void
exit_like(int status)
{
	if (status < 0)
		exit(RUN_FAILED);
	if (WIFSIGNALED(status))
	{
		int			sig = WTERMSIG(status);

		signal(sig, SIG_DFL);
		raise(sig);
		exit(128 + sig);		/* a signal that does not end us */
	}
	exit(WEXITSTATUS(status));
}

int
main(int argc, char **argv)
{
	struct pce_loader_info li;
	char		why[PATH_MAX + 256];
	int			status;

	parse_options(argc, argv);
	memset(&li, 0, sizeof(li));
	if (!open_scan_map(&li, why, sizeof(why)) || !mark_root(why, sizeof(why)))
	{
		if (opt.require)
			fail("%s", why);
		warn("%s; running the command without protecting the cache", why);
		if (scan_pids_fd >= 0)
			close(scan_pids_fd);
		scan_pids_fd = -1;
	}
	else
		join_policy_cgroup(&li);
	status = run_command();
	unmark_tree();
	exit_like(status);
}
