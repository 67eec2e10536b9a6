/*
 * pins.c
 *		The loader's pin directories, held by file descriptor.
 *
 * The pin root (pg_cache_ext.bpffs_dir, default /sys/fs/bpf/pg_cache_ext)
 * sits on a bpffs that is often mode 1777, where any local user may make
 * entries, and its path may come from a configuration file the postgres
 * account writes.  So the loader never acts on these directories by name
 * after the first lookup:
 *
 *	- bpffs_dir is resolved with openat2(RESOLVE_NO_SYMLINKS): a symlink
 *	  anywhere in it is refused, and what was checked is what is used;
 *	- its parent must be a bpffs, which the loader mounts itself when it is
 *	  not one (bpffs_mount.c: the default /run/pg_cache_ext, reachable by the
 *	  server where systemd's /sys/fs/bpf is not); the pin root itself must be a directory of
 *	  root's on the same mount (the bpffs mount itself is never chowned or
 *	  chmodded), the cluster's directory too;
 *	- directories are made with mkdirat() and changed with fchown()/fchmod()
 *	  on their fds; pins with fchownat()/fchmodat(AT_SYMLINK_NOFOLLOW)
 *	  relative to the directory fd, and only regular files (what pins are);
 *	- APIs that take a path (libbpf, BPF_OBJ_PIN/GET) get
 *	  /proc/self/fd/<dir fd>/<name>, which names the directory held, not
 *	  whatever the path names by then;
 *	- loaders that change pins run one at a time: flock() on the pin root,
 *	  which is mode 0711 so that no other user can open it and hold the lock;
 *	- in a cluster's directory the loader changes and removes only its own
 *	  pins (own_pins[], the one table of their names and modes), never an
 *	  entry it did not make;
 *	- the directory's name is the system identifier (which the postgres
 *	  account writes, and a streaming standby shares with its primary) and
 *	  -D's device and inode (bpf/pce_paths.h), so each data directory has
 *	  its own; and the directory is bound to its data directory: the
 *	  root-only owner pin, made right after the directory and removed last,
 *	  holds -D's device and inode, and a run for another data directory (one
 *	  named by --cluster-id, or a reused inode number) is refused.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include <bpf/bpf.h>

#include "pg_cache_ext.h"
#include "pce_bpffs.h"
#include "bpffs_mount.h"
#include "pins.h"
#include "safe_open.h"

/*
 * The loader's own pins: all it ever changes or removes in a cluster's
 * directory (links are pinned as <name>_new first, then renamed).  group:
 * the server's group may use it (root:<group> 0660); else root's alone
 * (root:root 0600): the links and the struct_ops map, which the server only
 * checks for (a group member could detach a link it can open, or hold the
 * struct_ops map and stall a detach).
 */
static const struct
{
	const char *name;
	bool		group;
}			own_pins[] = {
	{PCE_PIN_SCAN_PIDS, true},
	{PCE_PIN_STATS, true},
	{PCE_PIN_KNOBS, true},
	{PCE_PIN_LOADER_INFO, true},
	{PCE_PIN_IO_WORKERS, true},
	{PCE_PIN_SCAN_OWNERS, true},
	{PCE_PIN_FOLIO_EVENTS, true},
	{PCE_PIN_SCAN_POSITIONS, true},
	{PCE_PIN_TRACKER_LINK, false},
	{PCE_PIN_TRACKER_REMOVE_LINK, false},
	{PCE_PIN_TRACKER_ACTIVATE_LINK, false},
	{PCE_PIN_TRACKER_FORK_LINK, false},
	{PCE_PIN_TRACKER_WRITEBACK_LINK, false},
	{PCE_PIN_POLICY_LINK, false},
	{PCE_PIN_POLICY_MAP, false},
	{PCE_PIN_POLICY_STATE, false},	/* holds a detach's record of the cgroup's limits */
	{PCE_PIN_OWNER, false},		/* last: made first, removed last */
};

#define N_OWN_PINS	(sizeof(own_pins) / sizeof(own_pins[0]))

/* a loader waits this long for another (whose policy detach may take 60 s) */
#define PCE_LOCK_WAIT_MS	120000

static int
open_parent_dir(const char *parent, char *err, size_t errlen)
{
	int			fd = pce_openat2(AT_FDCWD, parent, O_PATH | O_DIRECTORY,
								 RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);

	if (fd < 0 && errno != ENOENT && errno != ENOTDIR)
		snprintf(err, errlen, "cannot use \"%s\": %s", parent, pce_open_error(errno));
	return fd;
}

/*
 * <bpffs_dir>'s parent, which must be a bpffs mount: when installing, the
 * loader mounts one there if it may (bpffs_mount.c).  base gets the last
 * component.  -1 with err; -2 when the parent does not exist and nothing
 * is installed (nothing to read or remove then).
 */
static int
open_parent(const char *bpffs_dir, enum pce_pins_use use, char *base, size_t baselen,
			char *err, size_t errlen)
{
	char		parent[PATH_MAX];
	char		why[PATH_MAX + 256] = "";
	int			fd;

	snprintf(base, baselen, "%s", strrchr(bpffs_dir, '/') + 1);	/* the path rule leaves a slash and a name */
	pce_bpffs_parent(bpffs_dir, parent, sizeof(parent));
	fd = open_parent_dir(parent, err, errlen);
	if (fd < 0 && errno != ENOENT && errno != ENOTDIR)
		return -1;
	if (fd < 0 && errno == ENOENT && use != PCE_PINS_INSTALL)
		return -2;
	if ((fd < 0 || !pce_fd_on_bpffs(fd)) && use == PCE_PINS_INSTALL)
	{
		if (fd >= 0)
			close(fd);
		if (pce_mount_own_bpffs(parent, why, sizeof(why)) < 0)
		{
			snprintf(err, errlen, "%s", why);
			return -1;
		}
		fd = open_parent_dir(parent, err, errlen);
	}
	if (fd < 0 || !pce_fd_on_bpffs(fd))
	{
		snprintf(err, errlen, "bpffs is not mounted: %s (mount -t bpf bpf %s)",
				 why[0] ? why : "not a bpffs mount", parent);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Is fd the root of a mount (a bind mount of the bpffs root too)?  Linux 5.8+ says so. */
static bool
is_mount_root(int fd)
{
	struct statx stx;

	return statx(fd, "", AT_EMPTY_PATH, 0, &stx) == 0 &&
		(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
		(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/*
 * Open name below dirfd as a directory of root's on dirfd's mount, making
 * it first with mode when installing; -1 with errno ENOENT when it does not
 * exist and that is allowed, else -1 with err.
 */
static int
open_own_dir(int dirfd, const char *name, const char *shown, enum pce_pins_use use, mode_t mode,
			 char *err, size_t errlen)
{
	struct stat st,
				dst;
	int			fd;

	if (use == PCE_PINS_INSTALL && mkdirat(dirfd, name, mode) != 0 && errno != EEXIST)
	{
		snprintf(err, errlen, "cannot create \"%s\": %s", shown, strerror(errno));
		return -1;
	}
	fd = pce_openat2(dirfd, name, (use == PCE_PINS_READ ? O_PATH : O_RDONLY) | O_DIRECTORY | O_NOFOLLOW,
					 PCE_RESOLVE_STRICT);
	if (fd < 0)
	{
		int			e = errno;

		if (e == ENOENT && use != PCE_PINS_INSTALL)
			return -1;
		snprintf(err, errlen, "cannot use \"%s\": %s", shown,
				 e == ENOTDIR ? "not a directory" : pce_open_error(e));
		errno = e == ENOENT ? EIO : e;
		return -1;
	}
	if (fstat(fd, &st) != 0 || fstat(dirfd, &dst) != 0)
		snprintf(err, errlen, "cannot stat \"%s\": %s", shown, strerror(errno));
	else if (st.st_uid != 0)
		snprintf(err, errlen, "\"%s\" is owned by uid %u, not root: refused (remove it; on a bpffs "
				 "of mode 1777 any user can make it)", shown, (unsigned) st.st_uid);
	else if (st.st_dev != dst.st_dev || is_mount_root(fd))
		snprintf(err, errlen, "\"%s\" is a mount point: name a directory below it", shown);
	else
		return fd;
	close(fd);
	errno = EPERM;
	return -1;
}

/* flock() with a deadline, so that a stuck loader makes the next one fail, not hang. */
static int
lock_pin_root(int fd, const char *shown, char *err, size_t errlen)
{
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; waited += 50)
	{
		if (errno != EWOULDBLOCK && errno != EINTR)
		{
			snprintf(err, errlen, "cannot lock \"%s\": %s", shown, strerror(errno));
			return -1;
		}
		if (waited >= PCE_LOCK_WAIT_MS)
		{
			snprintf(err, errlen, "another pg_cache_ext_loader has held \"%s\" for %d s: giving up",
					 shown, PCE_LOCK_WAIT_MS / 1000);
			return -1;
		}
		usleep(50000);
	}
	return 0;
}

/* Owner and mode of a directory we made or checked, by its fd. */
static int
set_dir_owner(int fd, gid_t gid, mode_t mode, const char *shown, char *err, size_t errlen)
{
	if (fchown(fd, 0, gid) != 0 || fchmod(fd, mode) != 0)
	{
		snprintf(err, errlen, "cannot set owner/mode of \"%s\": %s", shown, strerror(errno));
		return -1;
	}
	return 0;
}

static int
open_root(const char *bpffs_dir, enum pce_pins_use use, struct pce_pins *p, char *err, size_t errlen)
{
	char		base[PATH_MAX];
	int			parent = open_parent(bpffs_dir, use, base, sizeof(base), err, errlen);

	if (parent == -2)
		return 0;				/* no bpffs yet, so no pins: nothing to read or remove */
	if (parent < 0)
		return -1;
	p->root_fd = open_own_dir(parent, base, bpffs_dir, use, 0711, err, errlen);
	close(parent);
	if (p->root_fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (use == PCE_PINS_INSTALL && set_dir_owner(p->root_fd, 0, 0711, bpffs_dir, err, errlen) != 0)
		return -1;
	if (use != PCE_PINS_READ && lock_pin_root(p->root_fd, bpffs_dir, err, errlen) != 0)
		return -1;
	return 0;
}

/* The owner pin's map, checked to be what the loader makes before it is read. */
static int
open_owner_map(const struct pce_pins *p, char *err, size_t errlen)
{
	char		path[PATH_MAX];
	struct bpf_map_info info;
	__u32		len = sizeof(info);
	struct stat st;
	int			fd;

	if (fstatat(p->dir_fd, PCE_PIN_OWNER, &st, AT_SYMLINK_NOFOLLOW) != 0)
	{
		if (errno == ENOENT)
			return -2;
		snprintf(err, errlen, "cannot stat \"%s/%s\": %s", p->shown, PCE_PIN_OWNER, strerror(errno));
		return -1;
	}
	memset(&info, 0, sizeof(info));
	fd = S_ISREG(st.st_mode) && st.st_uid == 0 && (st.st_mode & 077) == 0 ?
		bpf_obj_get(pce_pin_path(p, PCE_PIN_OWNER, path, sizeof(path))) : -1;
	if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == BPF_MAP_TYPE_ARRAY &&
		info.key_size == sizeof(__u32) && info.value_size == sizeof(struct pce_pin_owner) &&
		info.max_entries == 1)
		return fd;
	snprintf(err, errlen, "\"%s/%s\" is not the loader's owner pin (a root-only map): refused",
			 p->shown, PCE_PIN_OWNER);
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Pin the owner map naming the data directory: root's alone. */
static int
pin_owner(const struct pce_pins *p, const struct stat *datadir, char *err, size_t errlen)
{
	struct pce_pin_owner o = {.dev = datadir->st_dev, .ino = datadir->st_ino};
	char		path[PATH_MAX];
	__u32		key = 0;
	int			fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pce_owner", sizeof(key), sizeof(o), 1, NULL);
	int			rc = -1;

	if (fd >= 0 && bpf_map_update_elem(fd, &key, &o, BPF_ANY) == 0 &&
		bpf_obj_pin(fd, pce_pin_path(p, PCE_PIN_OWNER, path, sizeof(path))) == 0 &&
		fchownat(p->dir_fd, PCE_PIN_OWNER, 0, 0, AT_SYMLINK_NOFOLLOW) == 0 &&
		fchmodat(p->dir_fd, PCE_PIN_OWNER, 0600, AT_SYMLINK_NOFOLLOW) == 0)
		rc = 0;
	else
		snprintf(err, errlen, "cannot pin \"%s/%s\": %s", p->shown, PCE_PIN_OWNER, strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Does the directory hold any pin of the loader's but the owner pin? */
static bool
holds_own_pins(const struct pce_pins *p)
{
	char		tmp[128];

	for (size_t i = 0; i < N_OWN_PINS - 1; i++)
	{
		snprintf(tmp, sizeof(tmp), "%s_new", own_pins[i].name);
		if (pce_pin_exists(p, own_pins[i].name) || pce_pin_exists(p, tmp))
			return true;
	}
	return false;
}

/*
 * The cluster's directory must be bound to this data directory: by its
 * owner pin, or, with none, hold none of the loader's pins (a new
 * directory, or one a killed run left before its first pin), and then get
 * the owner pin first, before any other.
 */
static int
bind_to_datadir(const struct pce_pins *p, enum pce_pins_use use, const struct stat *datadir,
				char *err, size_t errlen)
{
	struct pce_pin_owner o;
	__u32		key = 0;
	int			fd = open_owner_map(p, err, errlen);

	if (fd == -1)
		return -1;
	if (fd >= 0)
	{
		int			found = bpf_map_lookup_elem(fd, &key, &o);

		close(fd);
		if (found == 0 && o.dev == (unsigned long long) datadir->st_dev &&
			o.ino == (unsigned long long) datadir->st_ino)
			return 0;
		snprintf(err, errlen, "another data directory (another cluster, or one removed whose inode "
				 "number this one reuses) already uses \"%s\": its pins are not this cluster's to change; give this "
				 "cluster its own --bpffs-dir (if that data directory is gone: pg_cache_ext_loader "
				 "--unload --cluster-id=ID)", p->shown);
		return -1;
	}
	if (holds_own_pins(p))
	{
		snprintf(err, errlen, "\"%s\" holds pg_cache_ext pins but no owner pin (made by an older "
				 "loader, or not for this data directory): refused; remove them with "
				 "pg_cache_ext_loader --unload --cluster-id=ID", p->shown);
		return -1;
	}
	return use == PCE_PINS_INSTALL ? pin_owner(p, datadir, err, errlen) : 0;
}

/*
 * Each of the loader's names in the directory must be a pin of root's (a
 * regular file): libbpf and BPF_OBJ_GET follow a symlink at a name.
 * Anything else there is refused before libbpf reuses pins.
 */
static int
check_own_names(const struct pce_pins *p, char *err, size_t errlen)
{
	char		names[2][128];
	struct stat st;

	for (size_t i = 0; i < N_OWN_PINS; i++)
	{
		snprintf(names[0], sizeof(names[0]), "%s", own_pins[i].name);
		snprintf(names[1], sizeof(names[1]), "%s_new", own_pins[i].name);
		for (int k = 0; k < 2; k++)
		{
			if (fstatat(p->dir_fd, names[k], &st, AT_SYMLINK_NOFOLLOW) != 0 ||
				(S_ISREG(st.st_mode) && st.st_uid == 0))
				continue;
			snprintf(err, errlen, "\"%s/%s\" is not one of the loader's pins (%s, uid %u): refused; "
					 "remove it", p->shown, names[k], S_ISLNK(st.st_mode) ? "a symbolic link" :
					 S_ISDIR(st.st_mode) ? "a directory" : "not a regular file", (unsigned) st.st_uid);
			return -1;
		}
	}
	return 0;
}

int
pce_pins_open(const char *bpffs_dir, const char *cluster_id, enum pce_pins_use use,
			  gid_t gid, const struct stat *datadir, struct pce_pins *p, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->root_fd = p->dir_fd = -1;
	p->gid = gid;
	snprintf(p->shown, sizeof(p->shown), "%s/%s", bpffs_dir, cluster_id);
	if (open_root(bpffs_dir, use, p, err, errlen) != 0)
		return -1;
	if (p->root_fd < 0)
		return 0;				/* no pin root: nothing to read or remove */
	p->dir_fd = open_own_dir(p->root_fd, cluster_id, p->shown, use, 0750, err, errlen);
	if (p->dir_fd < 0)
		return errno == ENOENT ? 0 : -1;
	snprintf(p->via_fd, sizeof(p->via_fd), "/proc/self/fd/%d", p->dir_fd);
	if (access(p->via_fd, F_OK) != 0)
	{
		snprintf(err, errlen, "cannot reach \"%s\" through %s: %s (is /proc mounted?)",
				 p->shown, p->via_fd, strerror(errno));
		return -1;
	}
	if (use == PCE_PINS_INSTALL && check_own_names(p, err, errlen) != 0)
		return -1;
	if (use != PCE_PINS_READ && datadir && bind_to_datadir(p, use, datadir, err, errlen) != 0)
		return -1;
	if (use == PCE_PINS_INSTALL && set_dir_owner(p->dir_fd, gid, 0750, p->shown, err, errlen) != 0)
		return -1;
	return 0;
}

const char *
pce_pin_path(const struct pce_pins *p, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", p->via_fd, name);
	return buf;
}

/* Owner root:gid and mode of a pin (a regular file); never through a link. */
static int
set_pin_owner(int dir_fd, const char *name, gid_t gid, mode_t mode, char *err, size_t errlen)
{
	struct stat st;

	if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
	{
		snprintf(err, errlen, "cannot stat pin \"%s\": %s", name, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode))
		return 0;				/* not a pin (only root can put anything here): leave it */
	if (fchownat(dir_fd, name, 0, gid, AT_SYMLINK_NOFOLLOW) != 0 ||
		fchmodat(dir_fd, name, mode, AT_SYMLINK_NOFOLLOW) != 0)
	{
		snprintf(err, errlen, "cannot set owner/mode of pin \"%s\": %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

int
pce_pin_give_to_group(int dir_fd, const char *name, gid_t gid, char *err, size_t errlen)
{
	return set_pin_owner(dir_fd, name, gid, 0660, err, errlen);
}

int
pce_pin_keep_root(int dir_fd, const char *name, char *err, size_t errlen)
{
	return set_pin_owner(dir_fd, name, 0, 0600, err, errlen);
}

/* The loader's own pins that exist, each as own_pins[] says; nothing else. */
int
pce_pins_give_to_group(const struct pce_pins *p, char *err, size_t errlen)
{
	for (size_t i = 0; i < N_OWN_PINS; i++)
	{
		const char *name = own_pins[i].name;

		if (!pce_pin_exists(p, name))
			continue;
		if (own_pins[i].group ? pce_pin_give_to_group(p->dir_fd, name, p->gid, err, errlen) != 0
			: pce_pin_keep_root(p->dir_fd, name, err, errlen) != 0)
			return -1;
	}
	return 0;
}

static int
remove_one(const struct pce_pins *p, const char *name, char *err, size_t errlen)
{
	if (unlinkat(p->dir_fd, name, 0) != 0 && errno != ENOENT)
	{
		snprintf(err, errlen, "cannot remove \"%s/%s\": %s", p->shown, name, strerror(errno));
		return -1;
	}
	return 0;
}

int
pce_pins_remove_all(struct pce_pins *p, const char *cluster_id, char *err, size_t errlen)
{
	char		tmp[128];

	/* in the table's order: the owner pin last */
	for (size_t i = 0; i < N_OWN_PINS; i++)
	{
		snprintf(tmp, sizeof(tmp), "%s_new", own_pins[i].name);
		if (remove_one(p, tmp, err, errlen) != 0 || remove_one(p, own_pins[i].name, err, errlen) != 0)
			return -1;
	}
	close(p->dir_fd);
	p->dir_fd = -1;
	if (unlinkat(p->root_fd, cluster_id, AT_REMOVEDIR) != 0 && errno != ENOENT)
	{
		if (errno == ENOTEMPTY || errno == EEXIST)
		{
			p->foreign_left = true;	/* entries the loader did not make: not its to remove */
			return 0;
		}
		snprintf(err, errlen, "cannot remove \"%s\": %s", p->shown, strerror(errno));
		return -1;
	}
	return 0;
}

bool
pce_pin_exists(const struct pce_pins *p, const char *name)
{
	struct stat st;

	return p->dir_fd >= 0 && fstatat(p->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

void
pce_pins_close(struct pce_pins *p)
{
	if (p->dir_fd >= 0)
		close(p->dir_fd);
	if (p->root_fd >= 0)
		close(p->root_fd);	/* and with it the lock */
	p->dir_fd = p->root_fd = -1;
}
