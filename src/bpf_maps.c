/*-------------------------------------------------------------------------
 *
 * bpf_maps.c
 *		Map transport: opening the pins the loader made for this cluster,
 *		and every read/write the module does on them.  What the values mean
 *		(the mechanism in force, the knobs from the settings) is decided in
 *		status.c.
 *
 * The server never creates BPF objects: it only opens pins (owner root,
 * group postgres, mode 0660) with bpf_obj_get(), which works without any
 * capability.  Each process opens the maps lazily and keeps the
 * descriptors; when a pin is replaced (the loader was rerun after --unload)
 * the inode of the pin changes and the process reopens.  Failures never
 * raise an error: they are remembered in a one-line reason that
 * cache_ext_status() reports.
 *
 * Only pins that root made for this server are used: every pin of the
 * directory (maps, ring buffer, links) must be owned by root, give nothing
 * to other users and access to no group but the server's, and the
 * directory must be root's too.  A pin anyone could open would let another
 * local user mark processes, consume the scan records or detach the policy
 * while the server reports itself active.  The check and the use are made
 * on the same inode: the pin is opened with O_PATH | O_NOFOLLOW below a
 * descriptor of the directory, checked with fstat(), and the BPF object is
 * taken through /proc/self/fd/N of that descriptor.  (fstat() of the
 * descriptor bpf_obj_get() returns describes an anonymous inode, not the
 * pin, so it cannot serve.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

#include "pg_cache_ext_int.h"
#include "pce_bpffs.h"
#include "pce_pin_trust.h"
#include "pce_paths.h"

typedef struct PceMap
{
	const char *name;
	int			fd;
	ino_t		ino;			/* inode of the pin when opened */
} PceMap;

static PceMap maps[] = {
	{PCE_PIN_SCAN_PIDS, -1, 0},
	{PCE_PIN_STATS, -1, 0},
	{PCE_PIN_KNOBS, -1, 0},
	{PCE_PIN_LOADER_INFO, -1, 0},
	{PCE_PIN_IO_WORKERS, -1, 0},
	{PCE_PIN_SCAN_OWNERS, -1, 0},
};

#define NUM_MAPS lengthof(maps)

/*
 * Pins the server does not keep open here but that must pass the same
 * check whenever they exist: the ring buffer (the evictor opens it with
 * pce_pin_open()), the links and the struct_ops map.
 */
static const char *const other_pins[] = {
	PCE_PIN_FOLIO_EVENTS,
	PCE_PIN_TRACKER_LINK,
	PCE_PIN_TRACKER_REMOVE_LINK,
	PCE_PIN_TRACKER_ACTIVATE_LINK,
	PCE_PIN_TRACKER_FORK_LINK,
	PCE_PIN_TRACKER_WRITEBACK_LINK,
	PCE_PIN_SCAN_POSITIONS,
	PCE_PIN_POLICY_LINK,
	PCE_PIN_POLICY_MAP,
};

static PceMapsState state = PCE_MAPS_NOT_OPEN;
static char error_reason[1024];
static TimestampTz last_attempt = 0;
static int	last_attempt_pid = 0;
static uint64 generation = 0;	/* bumped whenever a map is (re)opened */

/*
 * This cluster's pin directory: <bpffs_dir>/<system identifier>-<device>-
 * <inode of the data directory> (the one rule of pce_paths.h, which the
 * loader follows for -D).
 */
const char *
pce_pin_dir(void)
{
	static char dir[MAXPGPATH];

	if (dir[0] == '\0')
	{
		char		name[PCE_CLUSTER_DIR_NAME_MAX];
		struct stat st;

		if (stat(DataDir, &st) != 0)
			memset(&st, 0, sizeof(st));
		pce_cluster_dir_name(name, GetSystemIdentifier(), st.st_dev, st.st_ino);
		snprintf(dir, sizeof(dir), "%s/%s", pce_bpffs_dir, name);
	}
	return dir;
}

void
pce_maps_close(void)
{
	for (int i = 0; i < NUM_MAPS; i++)
	{
		if (maps[i].fd >= 0)
			close(maps[i].fd);
		maps[i].fd = -1;
		maps[i].ino = 0;
	}
	state = PCE_MAPS_NOT_OPEN;
}

const char *
pce_maps_error(void)
{
	if (state == PCE_MAPS_OK)
		return NULL;
	if (state == PCE_MAPS_NOT_OPEN)
		return "maps not opened yet";
	return error_reason;
}

/*
 * The first directory on path that this process may not search, into dir;
 * false if there is none.  (systemd mounts /sys/fs/bpf with mode 0700: a
 * pin root below it is out of the server's reach whatever the pins' modes.)
 */
static bool
unsearchable_dir(const char *path, char *dir, size_t dirlen)
{
	struct stat st;

	strlcpy(dir, path, dirlen);
	for (char *slash = strchr(dir + 1, '/');; slash = strchr(slash + 1, '/'))
	{
		if (slash)
			*slash = '\0';
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, X_OK) != 0 && errno == EACCES)
			return true;
		if (!slash)
			return false;
		*slash = '/';
	}
}

/* Is dir a directory on a bpffs? */
static bool
dir_on_bpffs(const char *dir)
{
	int			fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	bool		on_bpffs = fd >= 0 && pce_fd_on_bpffs(fd);

	if (fd >= 0)
		close(fd);
	return on_bpffs;
}

/*
 * Why can't we use the pin directory?  One line, for status and logs.
 */
static void
diagnose(const char *path, int err)
{
	struct stat st;
	char		parent[MAXPGPATH];
	char		closed[MAXPGPATH];
	bool		on_bpffs;

	if (unsearchable_dir(path, closed, sizeof(closed)) && stat(closed, &st) == 0)
	{
		snprintf(error_reason, sizeof(error_reason),
				 "pins unreachable: the server's user may not search %s (mode %04o, owner uid %u; systemd "
				 "mounts /sys/fs/bpf so), so no pin below it can be used: keep the pins where the server "
				 "reaches them, e.g. pg_cache_ext.bpffs_dir and the loader's --bpffs-dir at their default "
				 "%s (a bpffs the loader mounts itself), rather than loosening %s",
				 closed, (unsigned) (st.st_mode & 07777), (unsigned) st.st_uid, PCE_DEFAULT_BPFFS_DIR, closed);
		return;
	}
	pce_bpffs_parent(pce_bpffs_dir, parent, sizeof(parent));
	/* the pin root itself is a container's bpffs: a bind mount of the host's */
	on_bpffs = dir_on_bpffs(pce_bpffs_dir) || dir_on_bpffs(parent);

	if (!on_bpffs)
		snprintf(error_reason, sizeof(error_reason),
				 "bpffs is not mounted at %s: pg_cache_ext_loader has not run since boot, or failed "
				 "(it mounts one there when it may; run pg_cache_ext_loader -D %s: under systemd the "
				 "drop-in runs it at each start of the cluster and logs why it failed in the unit's journal; "
				 "in a container, bind-mount the host's pin root at %s)",
				 parent, DataDir, pce_bpffs_dir);
	else if (stat(pce_pin_dir(), &st) != 0 && errno == ENOENT)
		snprintf(error_reason, sizeof(error_reason),
				 "pins missing: %s does not exist (pg_cache_ext_loader has not run for this cluster, "
				 "or failed: under systemd the drop-in runs it at each start of the cluster and logs "
				 "why it failed in the unit's journal; by hand: pg_cache_ext_loader -D %s)",
				 pce_pin_dir(), DataDir);
	else if (err == EACCES)
		snprintf(error_reason, sizeof(error_reason),
				 "permission denied on %s: pins must be group of the server's user with mode 0660 "
				 "(rerun pg_cache_ext_loader)", path);
	else if (err == EPERM)
	{
		/* the file's mode gives EACCES: EPERM is bpf(2) itself refused */
		snprintf(error_reason, sizeof(error_reason),
				 "bpf(2) refused to open %s (EPERM): a seccomp profile that forbids bpf(2), as Docker's "
				 "default does for a container without CAP_SYS_ADMIN (allow the bpf syscall in the "
				 "container's profile: README, \"Containers\"), or, before Linux 5.19, "
				 "kernel.unprivileged_bpf_disabled set", path);
	}
	else if (err == ENOENT)
		snprintf(error_reason, sizeof(error_reason),
				 "pins missing: %s does not exist (rerun pg_cache_ext_loader)", path);
	else
		snprintf(error_reason, sizeof(error_reason), "cannot open %s: %s", path, strerror(err));
}

/* The server's group by name, for messages (looked up once). */
static const char *
server_group_name(void)
{
	static char name[64];

	if (name[0] == '\0')
	{
		struct group *gr = getgrgid(getegid());

		if (gr)
			strlcpy(name, gr->gr_name, sizeof(name));
		else
			snprintf(name, sizeof(name), "%u", (unsigned) getegid());
	}
	return name;
}

/*
 * May we trust this pin?  Owned by root (only root can then change it), no
 * permission bits for other users, and group permissions only for the
 * server's own group (the rule of pce_pin_trust.h, which pg_cache_ext_run
 * shares).  Sets error_reason if not.
 */
static bool
pin_trusted(const char *path, const struct stat *st)
{
	char		want[128];

	if (pce_pin_trusted(st, getegid()))
		return true;

	snprintf(want, sizeof(want), "pins must be owned by root, group %s, mode 0660",
			 server_group_name());
	if (!S_ISREG(st->st_mode))
		snprintf(error_reason, sizeof(error_reason),
				 "refusing %s: not a pin (%s); remove it and rerun pg_cache_ext_loader",
				 path, S_ISLNK(st->st_mode) ? "a symbolic link" : "not a regular file");
	else if (st->st_mode & S_IRWXO)
		snprintf(error_reason, sizeof(error_reason),
				 "refusing %s: mode %04o lets other users in; %s (rerun pg_cache_ext_loader)",
				 path, (unsigned) (st->st_mode & 07777), want);
	else if (st->st_uid != pce_root_uid_here())
		snprintf(error_reason, sizeof(error_reason),
				 "refusing %s: owned by uid %u, not root (uid %u as this server sees it); %s "
				 "(rerun pg_cache_ext_loader)",
				 path, (unsigned) st->st_uid, (unsigned) pce_root_uid_here(), want);
	else if ((st->st_mode & S_IRWXG) && st->st_gid != getegid())
		snprintf(error_reason, sizeof(error_reason),
				 "refusing %s: group %u may open it, not only the server's group %s; %s "
				 "(rerun pg_cache_ext_loader --group %s)",
				 path, (unsigned) st->st_gid, server_group_name(), want, server_group_name());
	return false;
}

/*
 * The pin directory, as an O_PATH descriptor, if it is root's own directory
 * that other users cannot write into (so that nobody but root can swap a
 * pin).  Returns -1 with error_reason set otherwise.
 */
static int
open_pin_dir(void)
{
	const char *dir = pce_pin_dir();
	struct stat st;
	int			dfd = open(dir, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (dfd < 0)
	{
		diagnose(dir, errno);
		return -1;
	}
	if (fstat(dfd, &st) != 0)
	{
		diagnose(dir, errno);
		close(dfd);
		return -1;
	}
	if (!pce_pin_dir_trusted(&st, getegid()))
	{
		const char *what = S_ISDIR(st.st_mode) ? "a directory" :
			S_ISLNK(st.st_mode) ? "a symbolic link" : "not a directory";

		snprintf(error_reason, sizeof(error_reason),
				 "refusing %s: the pin directory must be a directory owned by root that only root "
				 "can change (it is %s, uid %u, mode %04o); remove it and rerun pg_cache_ext_loader",
				 dir, what, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777));
		close(dfd);
		return -1;
	}
	return dfd;
}

/*
 * Open pin name below the directory dfd with O_PATH and check it.  Returns
 * the O_PATH descriptor (*st filled), or -1 with errno set; *refused tells
 * whether the pin exists but failed the check (error_reason set then).
 */
static int
open_checked_pin(int dfd, const char *name, struct stat *st, bool *refused)
{
	char		path[MAXPGPATH];
	int			pfd;

	*refused = false;
	snprintf(path, sizeof(path), "%s/%s", pce_pin_dir(), name);
	pfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (fstat(pfd, st) != 0)
	{
		int			save_errno = errno;

		close(pfd);
		errno = save_errno;
		return -1;
	}
	if (!pin_trusted(path, st))
	{
		close(pfd);
		*refused = true;
		errno = EACCES;
		return -1;
	}
	return pfd;
}

/* The BPF object behind a checked O_PATH descriptor of its pin. */
static int
bpf_obj_get_by_path_fd(int pfd)
{
	char		proc_path[64];

	snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", pfd);
	return bpf_obj_get(proc_path);
}

/*
 * Open one pin, checked as above: the BPF object's descriptor, or -1 with
 * errno set (EACCES if the pin exists but is refused: the next
 * pce_maps_open() says why).  For the evictor's ring buffer.
 */
int
pce_pin_open(const char *name)
{
	struct stat st;
	bool		refused;
	int			dfd,
				pfd,
				fd;

	dfd = open_pin_dir();
	if (dfd < 0)
		return -1;
	pfd = open_checked_pin(dfd, name, &st, &refused);
	close(dfd);
	if (pfd < 0)
		return -1;
	fd = bpf_obj_get_by_path_fd(pfd);
	close(pfd);
	return fd;
}

/*
 * Open the maps of maps[] below the pin directory dfd, or reopen those whose
 * pin changed; false with error_reason set if one cannot be used.
 */
static bool
open_map_pins(int dfd)
{
	for (int i = 0; i < NUM_MAPS; i++)
	{
		char		path[MAXPGPATH];
		struct stat st;
		bool		refused;
		int			pfd;
		int			fd;

		snprintf(path, sizeof(path), "%s/%s", pce_pin_dir(), maps[i].name);
		pfd = open_checked_pin(dfd, maps[i].name, &st, &refused);
		if (pfd < 0)
		{
			if (!refused)
				diagnose(path, errno);
			return false;
		}
		if (maps[i].fd >= 0 && maps[i].ino == st.st_ino)
		{
			close(pfd);
			continue;
		}
		fd = bpf_obj_get_by_path_fd(pfd);
		close(pfd);
		if (fd < 0)
		{
			diagnose(path, errno);
			return false;
		}
		if (maps[i].fd >= 0)
			close(maps[i].fd);
		maps[i].fd = fd;
		maps[i].ino = st.st_ino;
		generation++;
	}
	return true;
}

/* The pins not opened here must be sound where present (see other_pins). */
static bool
other_pins_sound(int dfd)
{
	for (int i = 0; i < lengthof(other_pins); i++)
	{
		struct stat st;
		bool		refused;
		int			pfd = open_checked_pin(dfd, other_pins[i], &st, &refused);

		if (pfd >= 0)
			close(pfd);
		else if (refused)
			return false;
		else if (errno != ENOENT)
		{
			char		path[MAXPGPATH];

			snprintf(path, sizeof(path), "%s/%s", pce_pin_dir(), other_pins[i]);
			diagnose(path, errno);
			return false;
		}
	}
	return true;
}

/*
 * Open every map, or reopen those whose pin changed.  Returns true when all
 * maps are usable.  Without force, a failed attempt is retried at most once
 * a second, so a missing loader costs nothing on the hot path.
 */
bool
pce_maps_open(bool force)
{
	TimestampTz now;
	int			dfd = -1;

	if (last_attempt_pid != MyProcPid)
	{
		/* a new process (forked with our state): check again at once */
		last_attempt_pid = MyProcPid;
		last_attempt = 0;
	}
	now = GetCurrentTimestamp();

	/*
	 * Within a second of the last check, trust it.  After that, stat the
	 * pins again, so that a reloaded or removed loader is noticed.
	 */
	if (!force && last_attempt != 0 &&
		!TimestampDifferenceExceeds(last_attempt, now, 1000))
		return state == PCE_MAPS_OK;
	last_attempt = now;

	dfd = open_pin_dir();
	if (dfd < 0)
		goto unavailable;

	if (!open_map_pins(dfd) || !other_pins_sound(dfd))
		goto unavailable;
	close(dfd);

	state = PCE_MAPS_OK;
	error_reason[0] = '\0';
	return true;

unavailable:
	if (dfd >= 0)
		close(dfd);
	pce_maps_close();
	state = PCE_MAPS_UNAVAILABLE;
	return false;
}

/*
 * Changes whenever this process opened a new map: a caller that wrote
 * state into the maps (the worker's knobs) must write it again.
 */
uint64
pce_maps_generation(void)
{
	return generation;
}

int
pce_map_fd(const char *name)
{
	for (int i = 0; i < NUM_MAPS; i++)
		if (strcmp(maps[i].name, name) == 0)
			return maps[i].fd;
	return -1;
}

/* Returns 0, or an errno (E2BIG when the map is full). */
int
pce_map_update_mark(__u32 pid, const struct pce_scan_mark *mark)
{
	if (!pce_maps_open(false))
		return ENODEV;
	if (bpf_map_update_elem(pce_map_fd(PCE_PIN_SCAN_PIDS), &pid, mark, BPF_ANY) != 0)
		return errno;
	return 0;
}

int
pce_map_delete_mark(__u32 pid)
{
	if (state != PCE_MAPS_OK)
		return ENODEV;
	if (bpf_map_delete_elem(pce_map_fd(PCE_PIN_SCAN_PIDS), &pid) != 0)
		return errno;
	return 0;
}

bool
pce_map_has_mark(__u32 pid)
{
	struct pce_scan_mark mark;

	return pce_map_read_mark(pid, &mark);
}

/* The mark of pid into *mark; false if it has none (or without maps). */
bool
pce_map_read_mark(__u32 pid, struct pce_scan_mark *mark)
{
	if (!pce_maps_open(false))
		return false;
	return bpf_map_lookup_elem(pce_map_fd(PCE_PIN_SCAN_PIDS), &pid, mark) == 0;
}

/*
 * Call visit for every mark in the scan-PID map (at most PCE_MAX_SCAN_PIDS,
 * in the map's order), until it returns false; visit must not change the
 * map.  Returns how many marks were visited, or -1 without maps.
 */
int
pce_map_walk_marks(PceMarkVisitor visit, void *arg)
{
	int			fd;
	__u32		key,
				next,
			   *prev = NULL;
	int			n = 0;

	if (!pce_maps_open(false))
		return -1;
	fd = pce_map_fd(PCE_PIN_SCAN_PIDS);
	while (n < PCE_MAX_SCAN_PIDS && bpf_map_get_next_key(fd, prev, &next) == 0)
	{
		struct pce_scan_mark mark;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &mark) != 0)
			continue;			/* deleted meanwhile */
		n++;
		if (visit && !visit(key, &mark, arg))
			break;
	}
	return n;
}

/* Sum the per-CPU counters into out[PCE_STAT__COUNT]. */
bool
pce_map_read_stats(uint64 *out)
{
	int			ncpu = libbpf_num_possible_cpus();
	__u64	   *percpu;

	memset(out, 0, sizeof(uint64) * PCE_STAT__COUNT);
	if (ncpu <= 0 || !pce_maps_open(false))
		return false;
	percpu = palloc0(sizeof(__u64) * ncpu);
	for (__u32 i = 0; i < PCE_STAT__COUNT; i++)
	{
		if (bpf_map_lookup_elem(pce_map_fd(PCE_PIN_STATS), &i, percpu) != 0)
			continue;
		for (int c = 0; c < ncpu; c++)
			out[i] += percpu[c];
	}
	pfree(percpu);
	return true;
}

bool
pce_map_read_loader_info(struct pce_loader_info *out)
{
	__u32		key = 0;

	if (!pce_maps_open(false))
		return false;
	if (bpf_map_lookup_elem(pce_map_fd(PCE_PIN_LOADER_INFO), &key, out) != 0)
		return false;
	out->reason[sizeof(out->reason) - 1] = '\0';
	out->cgroup[sizeof(out->cgroup) - 1] = '\0';
	return out->abi_version == PCE_ABI_VERSION;
}

bool
pce_pin_present(const char *name)
{
	char		path[MAXPGPATH];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", pce_pin_dir(), name);
	return lstat(path, &st) == 0;
}

/* Write the knobs the worker made from the settings (at start and reload). */
bool
pce_map_write_knobs(const struct pce_knobs *k)
{
	__u32		key = 0;

	if (!pce_maps_open(false))
		return false;
	return bpf_map_update_elem(pce_map_fd(PCE_PIN_KNOBS), &key, k, BPF_ANY) == 0;
}

/*
 * Small maps keyed by a __u32 (io_workers, scan_owners): put, remove, get,
 * and list their keys.  put and remove return 0 or an errno (ENODEV without
 * maps).
 */
int
pce_map_put(const char *name, __u32 key, const void *value)
{
	if (!pce_maps_open(false))
		return ENODEV;
	if (bpf_map_update_elem(pce_map_fd(name), &key, value, BPF_ANY) != 0)
		return errno;
	return 0;
}

int
pce_map_remove(const char *name, __u32 key)
{
	if (state != PCE_MAPS_OK)
		return ENODEV;
	if (bpf_map_delete_elem(pce_map_fd(name), &key) != 0)
		return errno;
	return 0;
}

bool
pce_map_get(const char *name, __u32 key, void *value)
{
	if (!pce_maps_open(false))
		return false;
	return bpf_map_lookup_elem(pce_map_fd(name), &key, value) == 0;
}

/* Up to max keys of map name into keys; how many, or -1 without maps. */
int
pce_map_keys(const char *name, __u32 *keys, int max)
{
	int			fd;
	__u32		next,
			   *prev = NULL;
	int			n = 0;

	if (!pce_maps_open(false))
		return -1;
	fd = pce_map_fd(name);
	while (n < max && bpf_map_get_next_key(fd, prev, &next) == 0)
	{
		keys[n] = next;
		prev = &keys[n];
		n++;
	}
	return n;
}
