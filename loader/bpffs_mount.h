/*
 * bpffs_mount.h
 *		The loader's own bpffs mount (bpffs_mount.c).
 */
#ifndef PCE_LOADER_BPFFS_MOUNT_H
#define PCE_LOADER_BPFFS_MOUNT_H

#include <stddef.h>

/*
 * Make where (a path in normal form whose parent is root's own) a bpffs of
 * mode 0711, unless it is one: 0 when it is a bpffs now, 1 when the loader
 * may not mount there (err says why), -1 on an error (err).
 */
extern int	pce_mount_own_bpffs(const char *where, char *err, size_t errlen);

#endif
