/*
 * pins.h
 *		The loader's pin directories, held by file descriptor (pins.c): the
 *		pin root <bpffs_dir> and the cluster's <bpffs_dir>/<cluster id>, and
 *		the pins in them.
 */
#ifndef PCE_LOADER_PINS_H
#define PCE_LOADER_PINS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct pce_pins
{
	int			root_fd;		/* <bpffs_dir>, -1 if not open */
	int			dir_fd;			/* <bpffs_dir>/<cluster id>, -1 if missing */
	gid_t		gid;			/* the group the pins are given to */
	char		shown[PATH_MAX];	/* <bpffs_dir>/<cluster id>, for messages */
	char		via_fd[64];		/* /proc/self/fd/<dir_fd>: the directory itself, for path APIs */
};

enum pce_pins_use
{
	PCE_PINS_READ,				/* look only (--show, --check): no lock, no changes */
	PCE_PINS_INSTALL,			/* create what is missing, lock, set owners and modes */
	PCE_PINS_REMOVE				/* lock; the cluster's directory may be missing */
};

/*
 * Open the pin root and the cluster's directory for use, resolving
 * bpffs_dir without following any symlink, refusing directories that are
 * not root's own, and never touching the bpffs mount itself.  Returns 0,
 * or -1 with one line in err.  dir_fd is -1 when the cluster's directory
 * does not exist (READ and REMOVE only).
 */
extern int	pce_pins_open(const char *bpffs_dir, const char *cluster_id, enum pce_pins_use use,
						  gid_t gid, struct pce_pins *p, char *err, size_t errlen);

/* Path of pin name for libbpf and bpf_obj_*: through /proc/self/fd, not the name. */
extern const char *pce_pin_path(const struct pce_pins *p, const char *name, char *buf, size_t len);

/* Root-owned, group p->gid, mode 0660, if name is a pin (regular file); never through a link. */
extern int	pce_pin_give_to_group(int dir_fd, const char *name, gid_t gid, char *err, size_t errlen);

/* Every pin in the directory, as above. */
extern int	pce_pins_give_to_group(const struct pce_pins *p, char *err, size_t errlen);

/* Remove every entry of the cluster's directory, then the directory. */
extern int	pce_pins_remove_all(struct pce_pins *p, const char *cluster_id, char *err, size_t errlen);

extern bool pce_pin_exists(const struct pce_pins *p, const char *name);
extern void pce_pins_close(struct pce_pins *p);

#endif
