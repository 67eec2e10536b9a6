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
#include <sys/stat.h>
#include <sys/types.h>

/*
 * The pin binding a cluster's directory to its data directory: a root-only
 * array map of one struct pce_pin_owner, pinned first when the directory is
 * made and removed last.  The server never opens it.
 */
#define PCE_PIN_OWNER	"owner"

struct pce_pin_owner
{
	unsigned long long dev;		/* st_dev and st_ino of the data directory (-D) */
	unsigned long long ino;
};

struct pce_pins
{
	int			root_fd;		/* <bpffs_dir>, -1 if not open */
	int			dir_fd;			/* <bpffs_dir>/<cluster id>, -1 if missing */
	gid_t		gid;			/* the group the pins are given to */
	char		shown[PATH_MAX];	/* <bpffs_dir>/<cluster id>, for messages */
	char		via_fd[64];		/* /proc/self/fd/<dir_fd>: the directory itself, for path APIs */
	bool		foreign_left;	/* (remove) entries not the loader's kept the directory */
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
 *
 * datadir (fstat of -D; NULL with --cluster-id alone) binds the directory
 * to its data directory: INSTALL pins PCE_PIN_OWNER in a directory that has
 * none and holds none of the loader's pins (new, or left empty by a killed
 * run); INSTALL and REMOVE refuse a directory whose owner pin names another
 * data directory, or that holds the loader's pins without an owner pin.
 */
extern int	pce_pins_open(const char *bpffs_dir, const char *cluster_id, enum pce_pins_use use,
						  gid_t gid, const struct stat *datadir, struct pce_pins *p,
						  char *err, size_t errlen);

/* Path of pin name for libbpf and bpf_obj_*: through /proc/self/fd, not the name. */
extern const char *pce_pin_path(const struct pce_pins *p, const char *name, char *buf, size_t len);

/* Root-owned, group p->gid, mode 0660, if name is a pin (regular file); never through a link. */
extern int	pce_pin_give_to_group(int dir_fd, const char *name, gid_t gid, char *err, size_t errlen);

/* Root's alone: root:root, mode 0600 (links, the struct_ops map); never through a link. */
extern int	pce_pin_keep_root(int dir_fd, const char *name, char *err, size_t errlen);

/*
 * Each of the loader's own pins (one table in pins.c) that exists, as
 * above; nothing else in the directory is touched.
 */
extern int	pce_pins_give_to_group(const struct pce_pins *p, char *err, size_t errlen);

/*
 * Remove the loader's own pins (the owner pin last), then the directory if
 * that left it empty; p->foreign_left says when other entries kept it.
 */
extern int	pce_pins_remove_all(struct pce_pins *p, const char *cluster_id, char *err, size_t errlen);

extern bool pce_pin_exists(const struct pce_pins *p, const char *name);
extern void pce_pins_close(struct pce_pins *p);

#endif
