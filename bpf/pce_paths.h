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
 * A cluster's pin directory below the pin root is named
 * "<system identifier>-<device>-<inode>": the last two of its data
 * directory, as stat(2) gives them (what `stat -c %d-%i DATADIR` prints).
 * The system identifier alone does not tell clusters apart: a streaming
 * standby, or a copied cluster, has its primary's, and two clusters that
 * shared pins would remove each other's marks, consume each other's scan
 * records and unload each other.  The data directory's inode is what each
 * has alone on the host, and it is the same seen from a container (a bind
 * mount or volume keeps device and inode).  The loader takes them from -D,
 * the server from its DataDir; both name the directory here.
 */
#define PCE_CLUSTER_DIR_NAME_MAX	64	/* three 20-digit numbers, two '-', NUL */

static inline char *
pce_append_decimal(char *out, unsigned long long value)
{
	char		digits[20];
	int			n = 0;

	do
		digits[n++] = (char) ('0' + value % 10);
	while ((value /= 10) != 0);
	while (n > 0)
		*out++ = digits[--n];
	return out;
}

/* buf must hold PCE_CLUSTER_DIR_NAME_MAX bytes */
static inline void
pce_cluster_dir_name(char *buf, unsigned long long system_identifier,
					 unsigned long long datadir_dev, unsigned long long datadir_ino)
{
	char	   *p = buf;

	p = pce_append_decimal(p, system_identifier);
	*p++ = '-';
	p = pce_append_decimal(p, datadir_dev);
	*p++ = '-';
	p = pce_append_decimal(p, datadir_ino);
	*p = '\0';
}

/*
 * NULL when path follows the rule, else why not, as a phrase that fits
 * after "must be ..." / "is refused: ..." in a message.
 */
static inline const char *
pce_path_problem(const char *path)
{
	unsigned long len = 1;		/* the leading "/" */
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
