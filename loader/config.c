/*
 * config.c
 *		Read the pg_cache_ext.* settings the loader needs from the cluster's
 *		configuration files, so that postgresql.conf is the one place where
 *		pg_cache_ext is configured.
 *
 * The loader runs before the server (ExecStartPre), so it cannot ask the
 * server; it reads the files itself, with PostgreSQL's syntax: "name = value"
 * or "name value", a value quoted with '...' ('' or \' for a quote) or a bare
 * word, '#' to the end of the line.  Later lines win, and
 * postgresql.auto.conf (ALTER SYSTEM) is read after postgresql.conf, as the
 * server does.  include, include_if_exists and include_dir are followed as
 * the server follows them.
 *
 * The loader is root and these files are the postgres account's: each is
 * opened as the cluster's owner (safe_open.c), never through a final
 * symlink (nor through any symlink with conf->resolve RESOLVE_NO_SYMLINKS,
 * which --debian-cluster sets: /etc/postgresql/VERSION/NAME is the postgres
 * account's), never a FIFO or device, and read only if root or the cluster's
 * owner owns it, never on procfs, sysfs or devtmpfs (whose "files" the
 * caller of a setuid program, say, chooses).  Each setting remembers
 * whether its file is root's own: root-owned, not group- or other-writable,
 * with no other hard link, and included (if it is) only from files that are root's own too; trust
 * is inherited, so a root-owned file named by an include in
 * postgresql.auto.conf is not.  Only such a file may name a path the loader
 * acts on.  At most PCE_CONF_FILES_MAX files are read, nested at most
 * PCE_CONF_DEPTH_MAX deep.  Errors never quote a value.
 *
 * Everything read here is outside input: the parser never reads past its
 * buffer, bounds every value, and is fuzzed (fuzz/fuzz_loader_config.c).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "config.h"
#include "safe_open.h"

const char *const pce_conf_names[PCE_CONF__COUNT] = {
	[PCE_CONF_MODE] = "pg_cache_ext.mode",
	[PCE_CONF_BPFFS_DIR] = "pg_cache_ext.bpffs_dir",
	[PCE_CONF_CGROUP] = "pg_cache_ext.cgroup",
	[PCE_CONF_DATA_DIRECTORY] = "data_directory",
	[PCE_CONF_PRELOAD] = "shared_preload_libraries",
};

static const char *
skip_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/*
 * The value of a line: a quoted one from just after its opening quote ('' or
 * \' for a quote, \\ for a backslash), or a bare word.  Both copy into
 * value (bounded, *n bytes) and return where the line goes on, or NULL with
 * a reason.
 */
static const char *
quoted_value(const char *p, const char *end, char *value, size_t valuelen, size_t *n, const char **why)
{
	*n = 0;
	for (;;)
	{
		char		c;

		if (p >= end)
		{
			*why = "unterminated quoted value";
			return NULL;
		}
		c = *p++;
		if (c == '\'')
		{
			if (p < end && *p == '\'')
				p++;			/* '' is a quote */
			else
				return p;
		}
		else if (c == '\\' && p < end)
			c = *p++;			/* \' and \\ */
		if (*n + 1 >= valuelen)
		{
			*why = "value too long";
			return NULL;
		}
		value[(*n)++] = c;
	}
}

static const char *
bare_value(const char *p, const char *end, char *value, size_t valuelen, size_t *n, const char **why)
{
	*n = 0;
	while (p < end && *p != '#' && *p != ' ' && *p != '\t' && *p != '\r')
	{
		if (*n + 1 >= valuelen)
		{
			*why = "value too long";
			return NULL;
		}
		value[(*n)++] = *p++;
	}
	if (*n == 0)
	{
		*why = "missing value";
		return NULL;
	}
	return p;
}

/*
 * Parse one line [p, end).  On a setting, copies its name and value (both
 * bounded) and returns 1; returns 0 for a blank or comment line, -1 with a
 * reason for a malformed one.
 */
static int
parse_line(const char *p, const char *end, char *name, size_t namelen,
		   char *value, size_t valuelen, const char **why)
{
	size_t		n = 0;

	p = skip_blanks(p, end);
	if (p == end || *p == '#')
		return 0;
	while (p < end && (isalnum((unsigned char) *p) || *p == '_' || *p == '.' || *p == '-'))
	{
		if (n + 1 >= namelen)
		{
			name[n] = '\0';
			*why = "name too long";
			return -1;
		}
		name[n++] = (char) tolower((unsigned char) *p++);
	}
	name[n] = '\0';
	if (n == 0)
	{
		*why = "a line must start with a setting's name";
		return -1;
	}
	p = skip_blanks(p, end);
	if (p < end && *p == '=')
		p = skip_blanks(p + 1, end);

	p = (p < end && *p == '\'') ? quoted_value(p + 1, end, value, valuelen, &n, why)
		: bare_value(p, end, value, valuelen, &n, why);
	if (!p)
		return -1;
	value[n] = '\0';
	p = skip_blanks(p, end);
	if (p < end && *p != '#')
	{
		*why = "unexpected text after the value";
		return -1;
	}
	return 1;
}

int
pce_parse_config_text(const char *text, size_t len, const char *source,
					  struct pce_loader_config *conf, pce_include_fn include, void *include_arg,
					  char *err, size_t errlen)
{
	const char *p = text;
	const char *end = text + len;
	int			lineno = 0;

	while (p < end)
	{
		const char *eol = memchr(p, '\n', end - p);
		char		name[128];
		char		value[PCE_CONF_VALUE_MAX];
		const char *why = NULL;
		int			rc;

		if (!eol)
			eol = end;
		lineno++;
		rc = parse_line(p, eol, name, sizeof(name), value, sizeof(value), &why);
		p = eol + 1;
		if (rc < 0)
		{
			/* a line that does not concern us may be anything the server accepts */
			if (strncasecmp(name, "pg_cache_ext.", 13) != 0)
				continue;
			snprintf(err, errlen, "%s line %d: %s", source, lineno, why);
			return -1;
		}
		if (rc == 0)
			continue;
		if (strcmp(name, "include") == 0 || strcmp(name, "include_if_exists") == 0 ||
			strcmp(name, "include_dir") == 0)
		{
			conf->line = lineno;
			if (include && include(name, value, include_arg, err, errlen) != 0)
				return -1;
			continue;
		}
		for (int i = 0; i < PCE_CONF__COUNT; i++)
		{
			if (strcmp(name, pce_conf_names[i]) != 0)
				continue;
			memcpy(conf->value[i], value, strlen(value) + 1);
			conf->trusted[i] = conf->source_trusted;
			snprintf(conf->where[i], sizeof(conf->where[i]), "%s line %d%s%s%s", source, lineno,
					 conf->chain[0] ? " (" : "", conf->chain, conf->chain[0] ? ")" : "");
		}
	}
	return 0;
}

/* Where an include directive of a file leads, and how deep we are. */
struct include_ctx
{
	char		dir[PATH_MAX];	/* directory of the including file */
	const char *shown;			/* the including file, for messages */
	int			depth;
	struct pce_loader_config *conf;
};

static int	read_file(int dirfd, const char *path, const char *shown, bool missing_ok, int depth,
					  struct pce_loader_config *conf, char *err, size_t errlen);

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The *.conf names in d, not hidden ones, sorted; NULL with *n 0 if none. */
static char **
conf_names(DIR *d, size_t *n)
{
	struct dirent *de;
	char	  **names = NULL;
	size_t		cap = 0;

	*n = 0;
	while ((de = readdir(d)) != NULL)
	{
		size_t		len = strlen(de->d_name);

		if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".conf") != 0)
			continue;
		if (*n == cap)
		{
			char	  **more = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(char *));

			if (!more)
				break;
			names = more;
		}
		if ((names[*n] = strdup(de->d_name)) != NULL)
			(*n)++;
	}
	if (*n > 0)
		qsort(names, *n, sizeof(char *), name_cmp);
	return names;
}

/* include_dir: the directory's *.conf files, in name order, as the server reads them */
static int
read_dir(const char *dirpath, int depth, struct pce_loader_config *conf, char *err, size_t errlen)
{
	int			dfd = pce_openat2_as(conf->reader, AT_FDCWD, dirpath,
									 O_RDONLY | O_DIRECTORY | O_NOFOLLOW, conf->resolve);
	DIR		   *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	char	  **names;
	size_t		n;
	int			rc = 0;

	if (!d)
	{
		snprintf(err, errlen, "cannot open configuration directory \"%s\": %s", dirpath,
				 pce_open_error(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	names = conf_names(d, &n);
	for (size_t i = 0; i < n; i++)
	{
		char		shown[PATH_MAX];

		if (rc == 0)
		{
			snprintf(shown, sizeof(shown), "%s/%s", dirpath, names[i]);
			rc = read_file(dirfd(d), names[i], shown, false, depth, conf, err, errlen);
		}
		free(names[i]);
	}
	free(names);
	closedir(d);
	return rc;
}

static int
follow_include(const char *directive, const char *value, void *arg, char *err, size_t errlen)
{
	struct include_ctx *ctx = arg;
	struct pce_loader_config *conf = ctx->conf;
	char		path[PATH_MAX];
	char		outer_chain[sizeof(conf->chain)];
	int			rc;

	if (ctx->depth >= PCE_CONF_DEPTH_MAX)
	{
		snprintf(err, errlen, "%s line %d: configuration includes nested more than %d deep",
				 ctx->shown, conf->line, PCE_CONF_DEPTH_MAX);
		return -1;
	}
	if (value[0] == '/')
		snprintf(path, sizeof(path), "%s", value);
	else
		snprintf(path, sizeof(path), "%s/%s", ctx->dir, value);
	/* what the included file's settings say of where they come from */
	memcpy(outer_chain, conf->chain, sizeof(outer_chain));
	snprintf(conf->chain, sizeof(conf->chain), "included from %s line %d%s%s", ctx->shown,
			 conf->line, outer_chain[0] ? ", " : "", outer_chain);
	if (strcmp(directive, "include_dir") == 0)
		rc = read_dir(path, ctx->depth + 1, conf, err, errlen);
	else
		rc = read_file(AT_FDCWD, path, path, strcmp(directive, "include_if_exists") == 0,
					   ctx->depth + 1, conf, err, errlen);
	memcpy(conf->chain, outer_chain, sizeof(outer_chain));
	return rc;
}

/*
 * Is fd on a filesystem of the kernel's (procfs, sysfs, devtmpfs and the
 * like)?  Their files are not configuration: /proc/PID/cmdline of a
 * setuid program is root-owned and says what its caller chose.
 */
static bool
on_kernel_fs(int fd, const struct stat *st)
{
	static const long magics[] = {PROC_SUPER_MAGIC, SYSFS_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC,
		SECURITYFS_MAGIC, CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, BPF_FS_MAGIC, DEVPTS_SUPER_MAGIC};
	struct statfs fs;
	struct stat dev;

	if (fstatfs(fd, &fs) != 0)
		return true;
	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++)
		if ((long) fs.f_type == magics[i])
			return true;
	/* devtmpfs says it is a tmpfs: it is the filesystem of /dev */
	return stat("/dev", &dev) == 0 && dev.st_dev == st->st_dev;
}

/*
 * Open a configuration file as the cluster's owner, never through a final
 * symlink, never blocking (a FIFO), and check what was opened: a regular
 * file owned by root or the cluster's owner, not over the size limit.
 * Returns the fd, -2 for a missing file that may be missing, or -1.
 */
static int
open_conf_file(int dirfd, const char *path, const char *shown, bool missing_ok,
			   struct pce_loader_config *conf, struct stat *st, char *err, size_t errlen)
{
	uid_t		owner = conf->reader ? conf->reader->uid : 0;
	int			fd;

	if (++conf->files_read > PCE_CONF_FILES_MAX)
	{
		snprintf(err, errlen, "\"%s\": more than %d configuration files to read: giving up",
				 shown, PCE_CONF_FILES_MAX);
		return -1;
	}
	fd = pce_openat2_as(conf->reader, dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
						dirfd == AT_FDCWD ? conf->resolve : PCE_RESOLVE_STRICT);
	if (fd < 0)
	{
		if (missing_ok && errno == ENOENT)
			return -2;
		snprintf(err, errlen, "cannot read \"%s\": %s", shown, pce_open_error(errno));
		return -1;
	}
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))
		snprintf(err, errlen, "\"%s\" is not a regular file", shown);
	else if (on_kernel_fs(fd, st))
		snprintf(err, errlen, "\"%s\" is on procfs, sysfs or devtmpfs: not a configuration file", shown);
	else if (st->st_uid != 0 && st->st_uid != owner)
		snprintf(err, errlen, "\"%s\" is owned by uid %u, neither root nor the cluster's owner: not read",
				 shown, (unsigned) st->st_uid);
	else if (st->st_size > PCE_CONF_FILE_MAX)
		snprintf(err, errlen, "\"%s\" is larger than %d bytes", shown, PCE_CONF_FILE_MAX);
	else
		return fd;
	close(fd);
	return -1;
}

/* All of fd (at most PCE_CONF_FILE_MAX bytes), malloc'd; NULL on error. */
static char *
slurp(int fd, size_t *len, const char *shown, char *err, size_t errlen)
{
	char	   *text = malloc(PCE_CONF_FILE_MAX + 1);
	ssize_t		n = 0;

	*len = 0;
	if (!text)
	{
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	while (*len <= PCE_CONF_FILE_MAX && (n = read(fd, text + *len, PCE_CONF_FILE_MAX + 1 - *len)) > 0)
		*len += (size_t) n;
	if (n < 0 || *len > PCE_CONF_FILE_MAX)
	{
		snprintf(err, errlen, n < 0 ? "cannot read \"%s\"" : "\"%s\" is larger than %d bytes",
				 shown, PCE_CONF_FILE_MAX);
		free(text);
		return NULL;
	}
	return text;
}

static int
read_file(int dirfd, const char *path, const char *shown, bool missing_ok, int depth,
		  struct pce_loader_config *conf, char *err, size_t errlen)
{
	struct include_ctx ctx;
	struct stat st;
	bool		outer_trusted = conf->source_trusted;
	char	   *slash;
	char	   *text;
	size_t		len;
	int			fd;
	int			rc;

	fd = open_conf_file(dirfd, path, shown, missing_ok, conf, &st, err, errlen);
	if (fd < 0)
		return fd == -2 ? 0 : -1;
	text = slurp(fd, &len, shown, err, errlen);
	close(fd);
	if (!text)
		return -1;
	snprintf(ctx.dir, sizeof(ctx.dir), "%s", shown);
	slash = strrchr(ctx.dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(ctx.dir, sizeof(ctx.dir), ".");
	ctx.shown = shown;
	ctx.depth = depth;
	ctx.conf = conf;

	/*
	 * Only root may choose the paths the root loader acts on: a file is
	 * root's own if root owns it, no one else may write it, it has no
	 * other name (a hard link the postgres account made in its own
	 * directory, where fs.protected_hardlinks is off), and whatever
	 * included it is root's own too (an include in postgresql.auto.conf
	 * is the postgres account's choice of file).
	 */
	conf->source_trusted = (depth == 0 || outer_trusted) && st.st_uid == 0 &&
		(st.st_mode & (S_IWGRP | S_IWOTH)) == 0 && st.st_nlink == 1;
	rc = pce_parse_config_text(text, len, shown, conf, follow_include, &ctx, err, errlen);
	conf->source_trusted = outer_trusted;
	free(text);
	return rc;
}

int
pce_read_config_file(int dirfd, const char *path, const char *shown, bool missing_ok,
					 struct pce_loader_config *conf, char *err, size_t errlen)
{
	return read_file(dirfd, path, shown, missing_ok, 0, conf, err, errlen);
}

/* Does the list item [p, end) name library: "name", "name.so", ".../name[.so]"? */
static bool
item_names_library(const char *p, const char *end, const char *library)
{
	size_t		len = strlen(library);

	for (const char *q = p; q < end; q++)
		if (*q == '/')
			p = q + 1;			/* $libdir/name or a path: its file name */
	if (end - p == (ptrdiff_t) len + 3 && memcmp(end - 3, ".so", 3) == 0)
		end -= 3;
	return end - p == (ptrdiff_t) len && memcmp(p, library, len) == 0;
}

bool
pce_conf_preloads(const char *list, const char *library)
{
	const char *p = list;

	for (;;)
	{
		const char *start;
		const char *end;
		char		item[PCE_CONF_VALUE_MAX];
		size_t		n = 0;

		while (isspace((unsigned char) *p))
			p++;
		if (*p == '"')
		{
			/* a quoted item: "" is a quote */
			for (p++; *p && !(*p == '"' && p[1] != '"'); p++)
			{
				if (*p == '"')
					p++;
				if (n + 1 < sizeof(item))
					item[n++] = *p;
			}
			if (*p == '"')
				p++;
			start = item;
			end = item + n;
		}
		else
		{
			start = p;
			while (*p && *p != ',')
				p++;
			end = p;
			while (end > start && isspace((unsigned char) end[-1]))
				end--;
		}
		if (item_names_library(start, end, library))
			return true;
		while (*p && *p != ',')
			p++;
		if (*p++ != ',')
			return false;
	}
}
