/*
 * safe_open.h
 *		Opening files for the root loader without being steered by the
 *		postgres account: openat2() resolution flags, and opening a file
 *		with the filesystem identity of the cluster's owner, so that the
 *		loader reads only what that account could read itself (safe_open.c).
 */
#ifndef PCE_LOADER_SAFE_OPEN_H
#define PCE_LOADER_SAFE_OPEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/openat2.h>

/* resolution that follows no symlink and stays below dirfd */
#define PCE_RESOLVE_STRICT	(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH)

/* The account whose rights bound what the loader reads (the cluster's owner). */
struct pce_reader
{
	bool		set;			/* false: open with the loader's own rights */
	uid_t		uid;
	gid_t		gid;
	int			ngroups;
	gid_t		groups[64];
};

/*
 * openat2(dirfd, path, flags, resolve); -1 with errno on failure (ENOSYS on
 * a kernel before 5.6, which the caller reports: the loader needs 5.6+).
 */
extern int	pce_openat2(int dirfd, const char *path, int flags, unsigned long long resolve);

/* The owner of the directory dirfd, with that user's groups; -1 with errno. */
extern int	pce_reader_from_owner(int dirfd, struct pce_reader *r);

extern void pce_reader_from_uid(uid_t uid, gid_t gid, struct pce_reader *r);

/*
 * pce_openat2() with the filesystem identity (uid, gid, groups) of r, so
 * that permission checks are those r would meet; the loader's own identity
 * is back on return.  r NULL or unset, or not running as root: a plain
 * pce_openat2().
 */
extern int	pce_openat2_as(const struct pce_reader *r, int dirfd, const char *path, int flags,
						   unsigned long long resolve);

/* A message for an openat2() failure of path: ELOOP and ENOSYS explained. */
extern const char *pce_open_error(int err);

#endif
