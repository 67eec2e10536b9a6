/*
 * options.h
 *		The loader's command line, parsed and validated (options.c).  Kept
 *		apart from the BPF code so that the fuzzer can run it alone.
 */
#ifndef PCE_LOADER_OPTIONS_H
#define PCE_LOADER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include <linux/types.h>

#include "../bpf/pg_cache_ext.h"	/* the read hooks' names */
#include "../bpf/pce_modes.h"	/* the mode names */
#include "../bpf/pce_paths.h"	/* PCE_DEFAULT_BPFFS_DIR */

#define PCE_CLUSTER_ID_MAX		(PCE_CLUSTER_DIR_NAME_MAX - 1)

struct pce_loader_options
{
	const char *datadir;
	const char *cluster_id;
	const char *bpffs_dir;
	const char *group;
	const char *user;			/* the account that must own -D (default postgres) */
	const char *mode;			/* a name of bpf/pce_modes.h */
	const char *cgroup;
	const char *config_file;	/* default: DATADIR/postgresql.conf */
	const char *debian_cluster; /* VERSION-NAME of a Debian cluster (instead of -D) */
	enum pce_read_hook read_hook;	/* the first read hook to try (auto: the first) */
	bool		mode_given;		/* --mode / --bpffs-dir on the command line, */
	bool		bpffs_dir_given;	/* which then win over postgresql.conf */
	bool		check;
	bool		unload;
	bool		show;
	bool		verbose;
	bool		help;
};

/*
 * Parse argv into *opt.  Returns 0, or -1 with a one-line reason in err.
 * Restartable (resets getopt), so it can be called many times.
 */
extern int	pce_parse_loader_options(int argc, char **argv, struct pce_loader_options *opt,
									 char *err, size_t errlen);

/* Is this a valid --cluster-id?  (digits, a-z, '_' and '-', 1..31 chars) */
extern bool pce_valid_cluster_id(const char *id);

/*
 * NULL when path follows the one path rule of bpf/pce_paths.h (absolute,
 * normal form, bounded), else why not; for config.c and the fuzzer, which
 * do not see bpf/.
 */
extern const char *pce_path_option_problem(const char *path);

/*
 * Is this a mode the loader knows, in any case?  ("off" is one: the loader
 * loads anyway.)  The parser stores the table's spelling (pce_modes.h).
 */
extern bool pce_valid_mode(const char *mode);

extern bool pce_valid_debian_cluster(const char *instance);

#endif
