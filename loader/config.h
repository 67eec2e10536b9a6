/*
 * config.h
 *		The pg_cache_ext.* settings the loader reads from the cluster's
 *		configuration files (config.c).  Kept apart from the BPF code so that
 *		the fuzzer can run it alone.
 */
#ifndef PCE_LOADER_CONFIG_H
#define PCE_LOADER_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "safe_open.h"

#define PCE_CONF_VALUE_MAX	1024
#define PCE_CONF_FILE_MAX	(4 * 1024 * 1024)
#define PCE_CONF_FILES_MAX	1000	/* files read in all, includes too */
#define PCE_CONF_DEPTH_MAX	10		/* include nesting */
#define PCE_CONF_WHERE_MAX	(2 * PATH_MAX + 64)

enum pce_conf_setting
{
	PCE_CONF_MODE = 0,			/* pg_cache_ext.mode */
	PCE_CONF_BPFFS_DIR,			/* pg_cache_ext.bpffs_dir */
	PCE_CONF_CGROUP,			/* pg_cache_ext.cgroup */
	PCE_CONF_DATA_DIRECTORY,	/* data_directory (--debian-cluster) */
	PCE_CONF_PRELOAD,			/* shared_preload_libraries (--debian-cluster) */
	PCE_CONF__COUNT
};

/* the settings' names, by enum pce_conf_setting */
extern const char *const pce_conf_names[PCE_CONF__COUNT];

struct pce_loader_config
{
	char		value[PCE_CONF__COUNT][PCE_CONF_VALUE_MAX];	/* "" when not set */
	/* "FILE line N" of the last setting, "(included from FILE line N, ...)" if included */
	char		where[PCE_CONF__COUNT][PCE_CONF_WHERE_MAX];
	bool		trusted[PCE_CONF__COUNT];	/* it came from a file only root can write */
	const struct pce_reader *reader;	/* whose rights files are opened with; NULL: ours */
	unsigned long long resolve; /* openat2() resolve flags of paths by name (not below a dirfd) */
	/* while reading: */
	bool		source_trusted; /* the current file and all that included it are root's own */
	char		chain[PCE_CONF_WHERE_MAX];	/* "included from FILE line N, ..." or "" */
	int			line;			/* the line of the include directive being followed */
	int			files_read;		/* files opened so far, bounded by PCE_CONF_FILES_MAX */
};

/*
 * Called for an include, include_if_exists or include_dir directive with
 * its value; returns 0, or -1 with a reason in err.
 */
typedef int (*pce_include_fn) (const char *directive, const char *value, void *arg,
							   char *err, size_t errlen);

/*
 * Parse configuration text (len bytes, not necessarily NUL-terminated) into
 * *conf; later settings override earlier ones.  Includes go to include, or
 * are ignored when it is NULL.  Returns 0, or -1 with a one-line reason
 * naming source and line in err (never a value).
 */
extern int	pce_parse_config_text(const char *text, size_t len, const char *source,
								  struct pce_loader_config *conf, pce_include_fn include,
								  void *include_arg, char *err, size_t errlen);

/*
 * The same for the file path relative to dirfd (AT_FDCWD: an absolute path,
 * else no symlink and nothing outside dirfd), shown as shown in messages,
 * following its includes, opened with conf->reader's rights; a missing file
 * is not an error when missing_ok.
 */
extern int	pce_read_config_file(int dirfd, const char *path, const char *shown, bool missing_ok,
								 struct pce_loader_config *conf, char *err, size_t errlen);

/*
 * Does the shared_preload_libraries value list name library (e.g.
 * "pg_cache_ext")?  As the server reads it: comma-separated, blanks around
 * an item ignored, an item may be double-quoted, and an item names the
 * library by name, by $libdir/name or by a path, with or without ".so".
 */
extern bool pce_conf_preloads(const char *list, const char *library);

#endif
