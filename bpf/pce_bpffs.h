/*
 * pce_bpffs.h
 *		Where the pin root must sit: in a directory of a mounted bpffs (its
 *		parent directory).  One rule for the loader, which refuses to pin
 *		elsewhere, and the server, which says so when it finds no pins.
 *		User space only (not BPF code).
 */
#ifndef PCE_BPFFS_H
#define PCE_BPFFS_H

#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <linux/magic.h>

/*
 * The directory that must be on bpffs for pin root pin_root (a path that
 * follows pce_path_problem()'s rule): its parent, "/" for "/name".
 */
static inline void
pce_bpffs_parent(const char *pin_root, char *parent, size_t parentlen)
{
	char	   *slash;

	snprintf(parent, parentlen, "%s", pin_root);
	slash = strrchr(parent, '/');
	if (slash)
		slash[slash == parent ? 1 : 0] = '\0';
}

/* Is the open directory fd on a bpffs mount? */
static inline int
pce_fd_on_bpffs(int fd)
{
	struct statfs fs;

	return fstatfs(fd, &fs) == 0 && fs.f_type == BPF_FS_MAGIC;
}

#endif							/* PCE_BPFFS_H */
