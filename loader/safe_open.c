/*
 * safe_open.c
 *		Opening files for the root loader without being steered by the
 *		postgres account (see safe_open.h).
 *
 * The loader runs as root but reads files the postgres account writes
 * (postgresql.conf, postgresql.auto.conf, global/pg_control, includes).
 * Opening them with that account's filesystem identity (setfsuid,
 * setfsgid, setgroups: the process's real and effective ids stay root)
 * makes the kernel refuse exactly what that account could not open itself,
 * so no symlink, include or path leads the loader to reveal a root-only
 * file.  glibc 2.36 has no openat2() wrapper: the raw syscall is used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "safe_open.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

int
pce_openat2(int dirfd, const char *path, int flags, unsigned long long resolve)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (unsigned long long) (flags | O_CLOEXEC);
	how.resolve = resolve;
	return (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

int
pce_reader_from_owner(int dirfd, struct pce_reader *r)
{
	struct stat st;

	if (fstat(dirfd, &st) != 0)
		return -1;
	pce_reader_from_uid(st.st_uid, st.st_gid, r);
	return 0;
}

void
pce_reader_from_uid(uid_t uid, gid_t gid, struct pce_reader *r)
{
	struct passwd *pw;
	int			n;

	memset(r, 0, sizeof(*r));
	r->uid = uid;
	r->gid = gid;
	pw = getpwuid(uid);
	if (pw)
	{
		r->gid = pw->pw_gid;
		n = (int) (sizeof(r->groups) / sizeof(r->groups[0]));
		if (getgrouplist(pw->pw_name, pw->pw_gid, r->groups, &n) < 0)
			n = 0;				/* more than 64 groups: keep the primary one only */
		r->ngroups = n;
	}
	if (r->ngroups == 0)
	{
		r->groups[0] = r->gid;
		r->ngroups = 1;
	}
	r->set = true;
}

/* Become r for filesystem checks; false (and nothing changed) if we cannot. */
static bool
become(const struct pce_reader *r, gid_t *saved, int *nsaved)
{
	*nsaved = getgroups(64, saved);
	if (*nsaved < 0 || setgroups((size_t) r->ngroups, r->groups) != 0)
		return false;
	setfsgid(r->gid);
	setfsuid(r->uid);
	if ((uid_t) setfsuid((uid_t) -1) != r->uid || (gid_t) setfsgid((gid_t) -1) != r->gid)
	{
		setfsuid(0);
		setfsgid(0);
		setgroups((size_t) *nsaved, saved);
		return false;
	}
	return true;
}

int
pce_openat2_as(const struct pce_reader *r, int dirfd, const char *path, int flags,
			   unsigned long long resolve)
{
	gid_t		saved[64];
	int			nsaved;
	int			fd;
	int			err;

	if (!r || !r->set || geteuid() != 0 || r->uid == 0)
		return pce_openat2(dirfd, path, flags, resolve);
	if (!become(r, saved, &nsaved))
	{
		errno = EPERM;
		return -1;
	}
	fd = pce_openat2(dirfd, path, flags, resolve);
	err = errno;
	setfsuid(0);
	setfsgid(0);
	if (setgroups((size_t) nsaved, saved) != 0 || setfsuid((uid_t) -1) != 0)
		_exit(3);				/* cannot become root again: stop, changing nothing more */
	errno = err;
	return fd;
}

const char *
pce_open_error(int err)
{
	if (err == ELOOP)
		return "it is or goes through a symbolic link, which the root loader does not follow";
	if (err == EXDEV)
		return "it leads outside its directory";
	if (err == ENOSYS)
		return "this kernel has no openat2() (Linux 5.6 or later is needed)";
	return strerror(err);
}
