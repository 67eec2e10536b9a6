/*
 * bpffs_mount.c
 *		The loader's own bpffs, where the server can reach its pins.
 *
 * systemd mounts /sys/fs/bpf with mode 0700 before any unit runs, so on
 * every systemd host the unprivileged server cannot even traverse to pins
 * kept there, and loosening that mount would open it to every local user.
 * Every mount of bpffs is an instance of its own (pins in one are not seen
 * in another; the objects live while any pin or fd holds them), so the
 * loader mounts one for pg_cache_ext: the default pin root is
 * /run/pg_cache_ext/pins (bpf/pce_paths.h), and when the pin root's parent
 * is not a bpffs the loader mounts one there with mode 0711 (root's: others
 * may traverse it, not list or write it; nosuid, nodev, noexec).  /run is
 * emptied at boot, and the loader, run at each start of the cluster,
 * mounts it again.
 *
 * It mounts only where root alone decided it: the mount point must be a
 * directory of root's that no one else may write, missing (made 0711) or
 * empty, in a directory of root's that no one else may write, reached
 * without following a symlink; and it is mounted on the directory held by
 * fd (through /proc/self/fd), not on whatever its path names by then.
 * Loaders starting together take turns: flock() on that directory, which
 * others cannot open for reading (mode 0711).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "pce_bpffs.h"
#include "bpffs_mount.h"
#include "safe_open.h"

/* What a directory must be to hold a mount root alone decided on. */
static bool
roots_own(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == 0 && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

static bool
dir_is_empty(int fd)
{
	int			dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR		   *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	struct dirent *de;
	bool		empty = d != NULL;

	while (d && (de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			empty = false;
	if (d)
		closedir(d);
	else if (dup_fd >= 0)
		close(dup_fd);
	return empty;
}

/* Is name below dirfd (now) a bpffs? */
static bool
bpffs_at(int dirfd, const char *name)
{
	int			fd = pce_openat2(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, PCE_RESOLVE_STRICT);
	bool		yes = fd >= 0 && pce_fd_on_bpffs(fd);

	if (fd >= 0)
		close(fd);
	return yes;
}

/* The locked mount point: mount a bpffs on it unless another loader just did. */
static int
mount_on(int gfd, const char *name, int dfd, const char *where, char *err, size_t errlen)
{
	struct stat st;
	char		via[64];

	if (bpffs_at(gfd, name))
		return 0;				/* another loader mounted it meanwhile */
	if (fstat(dfd, &st) != 0 || !roots_own(&st) || !dir_is_empty(dfd))
	{
		snprintf(err, errlen, "%s is not a bpffs mount, and the loader mounts its own only on a new or "
				 "empty directory of root's that no one else may write", where);
		return 1;
	}
	snprintf(via, sizeof(via), "/proc/self/fd/%d", dfd);
	if (mount("bpf", via, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711") != 0)
	{
		snprintf(err, errlen, "cannot mount a bpffs at %s: %s", where, strerror(errno));
		return -1;
	}
	if (!bpffs_at(gfd, name))
	{
		snprintf(err, errlen, "mounted a bpffs at %s, but the path does not lead to it", where);
		return -1;
	}
	return 0;
}

int
pce_mount_own_bpffs(const char *where, char *err, size_t errlen)
{
	char		grand[PATH_MAX];
	const char *name;
	struct stat st;
	int			gfd,
				dfd,
				rc;

	if (strcmp(where, "/") == 0)
	{
		snprintf(err, errlen, "/ is not a bpffs mount, and the loader mounts none there");
		return 1;
	}
	pce_bpffs_parent(where, grand, sizeof(grand));
	name = strrchr(where, '/') + 1;
	gfd = pce_openat2(AT_FDCWD, grand, O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	if (gfd < 0 || fstat(gfd, &st) != 0 || !roots_own(&st))
	{
		snprintf(err, errlen, "%s is not a bpffs mount, and the loader mounts its own only in a "
				 "directory of root's that no one else may write (%s is not)", where, grand);
		if (gfd >= 0)
			close(gfd);
		return 1;
	}
	if (mkdirat(gfd, name, 0711) != 0 && errno != EEXIST)
	{
		snprintf(err, errlen, "cannot create %s: %s", where, strerror(errno));
		close(gfd);
		return -1;
	}
	dfd = pce_openat2(gfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, PCE_RESOLVE_STRICT);
	if (dfd < 0)
	{
		snprintf(err, errlen, "cannot use %s: %s", where, pce_open_error(errno));
		close(gfd);
		return -1;
	}
	if (flock(dfd, LOCK_EX) != 0)
	{
		snprintf(err, errlen, "cannot lock %s: %s", where, strerror(errno));
		rc = -1;
	}
	else
		rc = mount_on(gfd, name, dfd, where, err, errlen);
	close(dfd);
	close(gfd);
	return rc;
}
