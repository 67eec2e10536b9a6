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
 *	- its parent must be a bpffs; the pin root itself must be a directory of
 *	  root's on the same mount (the bpffs mount itself is never chowned or
 *	  chmodded), the cluster's directory too;
 *	- directories are made with mkdirat() and changed with fchown()/fchmod()
 *	  on their fds; pins with fchownat()/fchmodat(AT_SYMLINK_NOFOLLOW)
 *	  relative to the directory fd, and only regular files (what pins are);
 *	- APIs that take a path (libbpf, BPF_OBJ_PIN/GET) get
 *	  /proc/self/fd/<dir fd>/<name>, which names the directory held, not
 *	  whatever the path names by then;
 *	- loaders that change pins run one at a time: flock() on the pin root,
 *	  which is mode 0711 so that no other user can open it and hold the lock.
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

#include "pce_bpffs.h"
#include "pins.h"
#include "safe_open.h"

/* a loader waits this long for another (whose policy detach may take 60 s) */
#define PCE_LOCK_WAIT_MS	120000

/* <bpffs_dir>'s parent, which must be a bpffs mount; base gets the last component. */
static int
open_parent(const char *bpffs_dir, char *base, size_t baselen, char *err, size_t errlen)
{
	char		parent[PATH_MAX];
	int			fd;

	snprintf(base, baselen, "%s", strrchr(bpffs_dir, '/') + 1);	/* the path rule leaves a slash and a name */
	pce_bpffs_parent(bpffs_dir, parent, sizeof(parent));
	fd = pce_openat2(AT_FDCWD, parent, O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	if (fd < 0 && errno != ENOENT && errno != ENOTDIR)
	{
		snprintf(err, errlen, "cannot use \"%s\": %s", parent, pce_open_error(errno));
		return -1;
	}
	if (fd < 0 || !pce_fd_on_bpffs(fd))
	{
		snprintf(err, errlen, "bpffs is not mounted: %s is not a bpffs mount (mount -t bpf bpf %s)",
				 parent, parent);
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
	int			parent = open_parent(bpffs_dir, base, sizeof(base), err, errlen);

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

int
pce_pins_open(const char *bpffs_dir, const char *cluster_id, enum pce_pins_use use,
			  gid_t gid, struct pce_pins *p, char *err, size_t errlen)
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
	if (use == PCE_PINS_INSTALL && set_dir_owner(p->dir_fd, gid, 0750, p->shown, err, errlen) != 0)
		return -1;
	snprintf(p->via_fd, sizeof(p->via_fd), "/proc/self/fd/%d", p->dir_fd);
	if (access(p->via_fd, F_OK) != 0)
	{
		snprintf(err, errlen, "cannot reach \"%s\" through %s: %s (is /proc mounted?)",
				 p->shown, p->via_fd, strerror(errno));
		return -1;
	}
	return 0;
}

const char *
pce_pin_path(const struct pce_pins *p, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", p->via_fd, name);
	return buf;
}

int
pce_pin_give_to_group(int dir_fd, const char *name, gid_t gid, char *err, size_t errlen)
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
		fchmodat(dir_fd, name, 0660, AT_SYMLINK_NOFOLLOW) != 0)
	{
		snprintf(err, errlen, "cannot set owner/mode of pin \"%s\": %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Call fn for every entry of the cluster's directory but . and ..; stops at the first error. */
static int
for_each_pin(const struct pce_pins *p, int (*fn) (const struct pce_pins *, const char *, char *, size_t),
			 char *err, size_t errlen)
{
	int			fd = openat(p->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR		   *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int			rc = 0;

	if (!d)
	{
		snprintf(err, errlen, "cannot read \"%s\": %s", p->shown, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			rc = fn(p, de->d_name, err, errlen);
	closedir(d);
	return rc;
}

static int
give_one(const struct pce_pins *p, const char *name, char *err, size_t errlen)
{
	return pce_pin_give_to_group(p->dir_fd, name, p->gid, err, errlen);
}

int
pce_pins_give_to_group(const struct pce_pins *p, char *err, size_t errlen)
{
	return for_each_pin(p, give_one, err, errlen);
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
	if (for_each_pin(p, remove_one, err, errlen) != 0)
		return -1;
	close(p->dir_fd);
	p->dir_fd = -1;
	if (unlinkat(p->root_fd, cluster_id, AT_REMOVEDIR) != 0 && errno != ENOENT)
	{
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
