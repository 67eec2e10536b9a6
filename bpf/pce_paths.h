/*
 * pce_paths.h
 *		The one rule for the paths pg_cache_ext is configured with
 *		(pg_cache_ext.bpffs_dir, pg_cache_ext.cgroup, the loader's --bpffs-dir,
 *		--cgroup and --config-file), shared by the loader and the server so
 *		that a value one of them accepts the other accepts too.
 *
 * A path is accepted only in its normal form: absolute, no empty, "." or
 * ".." component, no trailing slash, no control character, and short
 * enough to have a pin name appended.  Nothing is resolved here: a value
 * that names the same directory another way is refused with the reason,
 * not rewritten, so that what is checked is what is used.
 *
 * Plain C without libc, so that any side can include it (not BPF code).
 * The default pin root lives here too, for the same reason.
 */
#ifndef PCE_PATHS_H
#define PCE_PATHS_H

/*
 * pg_cache_ext.bpffs_dir and the loader's --bpffs-dir when not set: on a
 * bpffs of the loader's own at /run/pg_cache_ext (loader/bpffs_mount.c),
 * which the server can reach where systemd's /sys/fs/bpf (mode 0700) is not
 */
#define PCE_DEFAULT_BPFFS_DIR	"/run/pg_cache_ext/pins"

/* room left below PATH_MAX (4096) for "/<cluster id>/<pin name>" */
#define PCE_PATH_VALUE_MAX	4000

/*
 * NULL when path follows the rule, else why not, as a phrase that fits
 * after "must be ..." / "is refused: ..." in a message.
 */
static inline const char *
pce_path_problem(const char *path)
{
	unsigned long len = 0;
	const char *comp;

	if (path == 0 || path[0] != '/')
		return "not an absolute path";
	if (path[1] == '\0')
		return "the root directory itself";
	comp = path + 1;
	for (const char *p = path + 1;; p++)
	{
		if (*p == '/' || *p == '\0')
		{
			unsigned long clen = (unsigned long) (p - comp);

			if (clen == 0)
				return *p ? "a path with an empty component (\"//\")" : "a path with a trailing slash";
			if ((clen == 1 && comp[0] == '.') || (clen == 2 && comp[0] == '.' && comp[1] == '.'))
				return "a path with a \".\" or \"..\" component";
			if (*p == '\0')
				break;
			comp = p + 1;
		}
		else if ((unsigned char) *p < 0x20 || *p == 0x7f)
			return "a path with a control character";
		if (++len >= PCE_PATH_VALUE_MAX)
			return "a path that is too long";
	}
	return 0;
}

#endif
