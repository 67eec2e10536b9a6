/*
 * pg_cache_ext_loader.c
 *		The privileged half of pg_cache_ext: a one-shot program, run as root
 *		(typically ExecStartPre of the cluster's systemd unit), that loads the
 *		BPF side for one cluster, pins it, and exits.
 *
 * Everything it creates lives below <bpffs_dir>/<cluster id>/ (default
 * /run/pg_cache_ext/pins/..., on a bpffs the loader mounts: bpffs_mount.c),
 * where the cluster id is the cluster's system identifier (the first field
 * of global/pg_control, what GetSystemIdentifier() returns in the server)
 * and the device and inode of its data directory (bpf/pce_paths.h):
 *
 *	scan_pids, stats, knobs, loader_info, io_workers, scan_owners
 *											maps shared by every mechanism
 *	folio_events							ring buffer (stock mechanism)
 *	scan_positions							where marked processes read (stock mechanism)
 *	tracker_link, tracker_remove_link		tracepoint links (stock mechanism)
 *	tracker_activate_link					tracepoint link for promotion (stock mechanism)
 *	tracker_writeback_link					tracepoint link: write-back for scans (stock)
 *	policy_link								struct_ops link (cache_ext mechanism)
 *
 *	owner									root-only: the data directory it belongs to
 *
 * Maps are group "postgres" (or --group), mode 0660, so the unprivileged
 * server can open and update them; links, the struct_ops map (policy_ops)
 * and the owner pin are root:root 0600 (the server only checks that they
 * exist); the directory is mode 0750, the pin root root's own, mode 0711.
 *
 * The loader is root; what it reads is the postgres account's.  So (see
 * pins.c, safe_open.c, config.c) it follows no symlink to its directories
 * and acts on them by fd, reads the cluster's files with the cluster
 * owner's rights, takes paths only from the command line or from files
 * only root can write, and runs one at a time (a lock on the pin root).
 *
 * Maps are pinned by name, so a second run reuses them (marks and counters
 * survive); programs and links are replaced: the new link is pinned under a
 * temporary name and renamed over the old one, so there is no moment without
 * a mechanism.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/types.h>
#include <linux/magic.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pg_cache_ext.h"
#include "accounts.h"
#include "config.h"
#include "options.h"
#include "policy.h"
#include "pins.h"
#include "report.h"
#include "tracker.h"
#include "safe_open.h"
#include "pce_paths.h"
#include "pce_bpffs.h"

static struct pce_loader_options opt;

static char cluster_id[PCE_CLUSTER_DIR_NAME_MAX];
static struct pce_pins pins;
static int	datadir_fd = -1;
static struct stat datadir_st;	/* of -D: binds the pin directory to it (pins.c) */
static struct pce_reader cluster_owner;	/* owner of -D: whose rights its files are read with */

static int
libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !opt.verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void
usage(void)
{
	printf("pg_cache_ext_loader loads the BPF side of pg_cache_ext for one cluster.\n\n"
		   "Usage:\n"
		   "  pg_cache_ext_loader -D DATADIR [OPTION]...\n\n"
		   "Options:\n"
		   "  -D, --pgdata=DATADIR     the cluster's data directory (gives the cluster id)\n"
		   "      --debian-cluster=VERSION-NAME  a Debian cluster (e.g. 15-main, systemd's\n"
		   "                           instance of postgresql@.service): its configuration in\n"
		   "                           /etc/postgresql/VERSION/NAME (no symlinks), its\n"
		   "                           data_directory; a cluster that does not preload\n"
		   "                           pg_cache_ext gets nothing loaded (exit 0)\n"
		   "      --cluster-id=ID      use this cluster id instead of reading DATADIR\n"
		   "      --bpffs-dir=DIR      pin root (default %s)\n"
		   "      --group=GROUP        group that may use the pins, a name or a number\n"
		   "                           (default postgres)\n"
		   "      --user=USER          the account the cluster runs as, a name or a number,\n"
		   "                           which must own DATADIR (default postgres)\n"
		   "      --mode=MODE          " PCE_MODE_CHOICES " (default auto; off loads as auto:\n"
		   "                           the server's pg_cache_ext.mode = off turns it off)\n"
		   "      --cgroup=PATH        cgroup v2 directory for the cache_ext policy\n"
		   "                           (default: the loader's own cgroup)\n"
		   "      --config-file=FILE   the server's postgresql.conf (default DATADIR/postgresql.conf)\n"
		   "      --read-hook=HOOK     where reads are seen: " PCE_READ_HOOK_CHOICES "; the\n"
		   "                           first of tracepoint, fentry, none from HOOK on that\n"
		   "                           the kernel accepts (default auto: from the first)\n"
		   "      --check              report what would be done, change nothing\n"
		   "      --unload             detach everything and remove the pins\n"
		   "      --show               print marked PIDs and counters (needs no root)\n"
		   "  -v, --verbose            print libbpf's debug output\n"
		   "  -h, --help               show this help\n\n"
		   "pg_cache_ext.mode, pg_cache_ext.bpffs_dir and pg_cache_ext.cgroup are read from\n"
		   "the configuration file and DATADIR/postgresql.auto.conf; the command line wins.\n",
		   PCE_DEFAULT_BPFFS_DIR);
}

/* Why scan folios cannot be promoted on this kernel, or "" when they can. */
static char promotion_missing[160];
static enum pce_read_hook read_hook;	/* the tracker's, once loaded */

/* What the configuration files said, for --check. */
static struct pce_loader_config cluster_conf;

/*
 * --group's gid (a name, or a number the host has no name for).  Never
 * root's group: the maps would be open to every task of gid 0.
 */
static gid_t
server_group(void)
{
	gid_t		gid;

	if (!pce_lookup_group(opt.group, &gid))
		pce_fail("group \"%s\" does not exist (--group names the group the server runs in, "
				 "or gives its number)", opt.group);
	if (gid == 0)
		pce_fail("--group \"%s\" is root's group: name the group the server runs in", opt.group);
	return gid;
}

/*
 * --user's uid, and its primary group into *gid if asked: for a number the
 * host has no account for (a container's), --group's.  Never root: the
 * server refuses to run as root, and files are read with this account's
 * rights.
 */
static uid_t
user_account(gid_t *gid)
{
	uid_t		uid;
	gid_t		primary;

	if (!pce_lookup_user(opt.user, (gid_t) -1, &uid, &primary))
		pce_fail("user \"%s\" does not exist (--user names the account the cluster runs as, "
				 "or gives its number)", opt.user);
	if (uid == 0)
		pce_fail("--user \"%s\" is root: not a PostgreSQL account (the server refuses to run as root)",
				 opt.user);
	if (gid)
		*gid = primary != (gid_t) -1 ? primary : server_group();
	return uid;
}

/*
 * Open -D (root's own argument, so followed as given: data directories are
 * symlinked) and take its owner as the account whose rights bound what is
 * read from the cluster's files.  That owner must be the cluster's account
 * (--user): on Debian postgres owns /var/lib/postgresql and could swap
 * .../main for a symlink to another account's directory, whose files the
 * loader would then read with that account's rights.
 */
static void
open_datadir(const struct pce_reader *as)
{
	uid_t		uid;

	datadir_fd = as ? pce_openat2_as(as, AT_FDCWD, opt.datadir, O_RDONLY | O_DIRECTORY, 0)
		: open(opt.datadir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (datadir_fd < 0)
		pce_fail("cannot open \"%s/global/pg_control\": %s (is -D a PostgreSQL data directory?)",
			 opt.datadir, strerror(errno));
	if (fstat(datadir_fd, &datadir_st) != 0 || pce_reader_from_owner(datadir_fd, &cluster_owner) != 0)
		pce_fail("cannot stat \"%s\": %s", opt.datadir, strerror(errno));
	if (cluster_owner.uid == 0)
		pce_fail("\"%s\" is owned by root: not a PostgreSQL data directory (the server refuses to run as root)",
			 opt.datadir);
	uid = user_account(NULL);
	if (uid != cluster_owner.uid)
		pce_fail("\"%s\" is owned by uid %u, not by the cluster's account \"%s\": refused (--user names "
			 "the account the cluster runs as)", opt.datadir, (unsigned) cluster_owner.uid, opt.user);
}

/*
 * A path setting from the configuration files, if the command line gave
 * none: only from a file only root can write (the loader acts as root on
 * it), and in the normal form of the shared rule.  Errors name the setting
 * and the file, never the value.
 */
static void
take_path_setting(enum pce_conf_setting i, const char *option, const char **target)
{
	const char *v = cluster_conf.value[i];
	const char *problem;

	if (!v[0])
		return;
	if (!cluster_conf.trusted[i])
		pce_fail("%s: %s is set in a file root does not own (or others may write, or that such a "
			 "file includes): the root loader takes no path from it; give %s on the command line instead",
			 cluster_conf.where[i], pce_conf_names[i], option);
	problem = pce_path_problem(v);
	if (problem)
		pce_fail("%s: invalid %s: %s (use the plain absolute path)", cluster_conf.where[i], pce_conf_names[i], problem);
	*target = v;
}

/*
 * --debian-cluster VERSION-NAME (systemd's instance of Debian's
 * postgresql@.service): the configuration is
 * /etc/postgresql/VERSION/NAME/postgresql.conf (or --config-file), and the
 * data directory its data_directory, as pg_ctlcluster finds it.  Both are
 * the postgres account's to write, so they are read with --user's rights
 * (the data directory is opened as that account too, then must be its own:
 * open_datadir()), never root's.  The configuration and its includes are
 * reached through no symlink at all: /etc/postgresql/VERSION and
 * .../NAME are the postgres account's directories, and a symlink there
 * would lead the loader to a root-owned file of that account's choice,
 * whose paths it would trust.
 */
static void
read_debian_cluster(char *why, size_t whylen)
{
	static char conf_path[PATH_MAX];
	static char datadir[PCE_CONF_VALUE_MAX];
	static struct pce_reader user_reader;
	const char *name = strchr(opt.debian_cluster, '-') + 1;	/* validated: VERSION-NAME */
	const char *problem;
	gid_t		gid;
	uid_t		uid = user_account(&gid);

	pce_reader_from_uid(uid, gid, &user_reader);
	if (!opt.config_file)
	{
		snprintf(conf_path, sizeof(conf_path), "/etc/postgresql/%.*s/%s/postgresql.conf",
				 (int) (name - 1 - opt.debian_cluster), opt.debian_cluster, name);
		opt.config_file = conf_path;
	}
	cluster_conf.reader = &user_reader;
	cluster_conf.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	if (pce_read_config_file(AT_FDCWD, opt.config_file, opt.config_file, false, &cluster_conf, why, whylen) != 0)
		pce_fail("cluster %s: %s", opt.debian_cluster, why);
	if (!cluster_conf.value[PCE_CONF_DATA_DIRECTORY][0])
		pce_fail("cluster %s: %s sets no data_directory", opt.debian_cluster, opt.config_file);
	problem = pce_path_problem(cluster_conf.value[PCE_CONF_DATA_DIRECTORY]);
	if (problem)
		pce_fail("%s: invalid data_directory: %s", cluster_conf.where[PCE_CONF_DATA_DIRECTORY], problem);
	snprintf(datadir, sizeof(datadir), "%s", cluster_conf.value[PCE_CONF_DATA_DIRECTORY]);
	opt.datadir = datadir;
	open_datadir(&user_reader);
	cluster_conf.reader = &cluster_owner;
}

/*
 * The drop-in runs the loader for every Debian cluster: one whose
 * configuration (the files the server reads, as read above) does not
 * preload pg_cache_ext gets nothing loaded, and the loader says so in one
 * line and exits 0.  --unload, --check and --show do what they say.
 */
static void
skip_cluster_without_module(void)
{
	const char *list = cluster_conf.value[PCE_CONF_PRELOAD];

	if (!opt.debian_cluster || opt.unload || opt.check || opt.show ||
		pce_conf_preloads(list, "pg_cache_ext"))
		return;
	pce_info("cluster %s does not preload pg_cache_ext (shared_preload_libraries %s%s): nothing loaded",
			 opt.debian_cluster, list[0] ? "in " : "is not set", cluster_conf.where[PCE_CONF_PRELOAD]);
	exit(0);
}

/*
 * Take pg_cache_ext.mode, .bpffs_dir and .cgroup from the server's
 * configuration files, so that they are set in one place; options given on
 * the command line win.  The data directory's files are opened below its
 * fd, following no symlink; all as the cluster's owner (config.c).
 */
static void
apply_cluster_config(void)
{
	char		why[PATH_MAX + 256];
	char		shown[PATH_MAX];
	char		auto_shown[PATH_MAX];

	if (opt.debian_cluster)
		read_debian_cluster(why, sizeof(why));
	else if (!opt.datadir)
		return;					/* --cluster-id alone: nothing to read */
	else
	{
		open_datadir(NULL);
		cluster_conf.reader = &cluster_owner;
		snprintf(shown, sizeof(shown), "%s/postgresql.conf", opt.datadir);
		if ((opt.config_file ?
			 pce_read_config_file(AT_FDCWD, opt.config_file, opt.config_file, false, &cluster_conf, why, sizeof(why)) :
			 pce_read_config_file(datadir_fd, "postgresql.conf", shown, true, &cluster_conf, why, sizeof(why))) != 0)
			pce_fail("%s", why);
	}
	snprintf(auto_shown, sizeof(auto_shown), "%s/postgresql.auto.conf", opt.datadir);
	if (pce_read_config_file(datadir_fd, "postgresql.auto.conf", auto_shown, true, &cluster_conf, why, sizeof(why)) != 0)
		pce_fail("%s", why);
	skip_cluster_without_module();

	if (cluster_conf.value[PCE_CONF_MODE][0] && !opt.mode_given)
	{
		/* in any case, as the server takes it: the table's spelling */
		opt.mode = pce_mode_canonical(cluster_conf.value[PCE_CONF_MODE]);
		if (!opt.mode)
			pce_fail("%s: invalid pg_cache_ext.mode: use " PCE_MODE_CHOICES,
				 cluster_conf.where[PCE_CONF_MODE]);
	}
	if (!opt.bpffs_dir_given)
		take_path_setting(PCE_CONF_BPFFS_DIR, "--bpffs-dir", &opt.bpffs_dir);
	if (!opt.cgroup)
		take_path_setting(PCE_CONF_CGROUP, "--cgroup", &opt.cgroup);
}

/*
 * The cluster id, which names the pin directory (bpf/pce_paths.h): the
 * system identifier at the start of global/pg_control, opened below -D
 * without following a symlink, as the cluster's owner, and only if that
 * owner owns it (its bytes are printed), with the device and inode of -D,
 * so that a standby or a copy of the cluster gets a directory of its own.
 */
static void
resolve_cluster_id(void)
{
	struct stat st;
	uint64_t	sysid;
	int			fd;

	if (opt.cluster_id)
	{
		/* validated by pce_parse_loader_options() */
		snprintf(cluster_id, sizeof(cluster_id), "%s", opt.cluster_id);
		return;
	}
	fd = pce_openat2_as(&cluster_owner, datadir_fd, "global/pg_control", O_RDONLY | O_NOFOLLOW | O_NONBLOCK,
						PCE_RESOLVE_STRICT);
	if (fd < 0)
		pce_fail("cannot open \"%s/global/pg_control\": %s (is -D a PostgreSQL data directory?)",
			 opt.datadir, pce_open_error(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != cluster_owner.uid)
		pce_fail("\"%s/global/pg_control\" is not a regular file of the data directory's owner: not read",
			 opt.datadir);
	if (read(fd, &sysid, sizeof(sysid)) != sizeof(sysid))
		pce_fail("cannot read the system identifier from \"%s/global/pg_control\"", opt.datadir);
	close(fd);
	pce_cluster_dir_name(cluster_id, sysid, datadir_st.st_dev, datadir_st.st_ino);
}

/* Give every pin in the cluster's directory group access, nothing more. */
static void
fix_pin_permissions(void)
{
	char		why[PATH_MAX + 256];

	if (pce_pins_give_to_group(&pins, why, sizeof(why)) != 0)
		pce_fail("%s", why);
}

/*
 * Record what was put in place: the mechanism, the tracker's read hook
 * (none in cache_ext mode, where the tracker's links are gone), why.
 */
static void
write_loader_info(struct bpf_map *map, enum pce_mechanism mech, const char *cgroup,
				  const char *reason)
{
	struct pce_loader_info li;
	__u32		key = 0;

	memset(&li, 0, sizeof(li));
	li.abi_version = PCE_ABI_VERSION;
	li.mechanism = mech;
	li.read_hook = mech == PCE_MECH_STOCK ? read_hook : PCE_READ_HOOK_NONE;
	li.loader_pid = getpid();
	li.loaded_at_unix = time(NULL);
	snprintf(li.cgroup, sizeof(li.cgroup), "%s", cgroup ? cgroup : "");
	snprintf(li.reason, sizeof(li.reason), "%s", reason);
	if (bpf_map_update_elem(bpf_map__fd(map), &key, &li, BPF_ANY) != 0)
		pce_fail("cannot write loader_info: %s", strerror(errno));
}

/*
 * Read loader_info back.  The server's group may write the maps, so what
 * comes back is outside input to this root program: its strings are cut
 * at their size, never trusted to be terminated.
 */
static bool
read_loader_info(int fd, struct pce_loader_info *li)
{
	__u32		key = 0;

	if (bpf_map_lookup_elem(fd, &key, li) != 0)
		return false;
	li->cgroup[sizeof(li->cgroup) - 1] = '\0';
	li->reason[sizeof(li->reason) - 1] = '\0';
	return true;
}

/* The cgroup v2 directory of this process (the unit's cgroup under systemd). */
static const char *
own_cgroup_v2(void)
{
	static char path[PATH_MAX];
	char		line[PATH_MAX];
	FILE	   *f = fopen("/proc/self/cgroup", "r");
	const char *mnt = NULL;
	struct statfs st;

	if (!f)
		return NULL;
	if (statfs("/sys/fs/cgroup", &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC)
		mnt = "/sys/fs/cgroup";
	else if (statfs("/sys/fs/cgroup/unified", &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC)
		mnt = "/sys/fs/cgroup/unified";
	path[0] = '\0';
	while (mnt && fgets(line, sizeof(line), f))
	{
		if (strncmp(line, "0::", 3) == 0)
		{
			line[strcspn(line, "\n")] = '\0';
			snprintf(path, sizeof(path), "%s%s", mnt, line + 3);
			break;
		}
	}
	fclose(f);
	return path[0] ? path : NULL;
}

/* The data directory the pin directory is bound to; NULL with --cluster-id alone (root's word). */
static const struct stat *
bound_to(void)
{
	return datadir_fd >= 0 ? &datadir_st : NULL;
}

static void
do_unload(void)
{
	char		why[PATH_MAX + 256];

	if (pce_pins_open(opt.bpffs_dir, cluster_id, PCE_PINS_REMOVE, 0, bound_to(), &pins, why, sizeof(why)) != 0)
		pce_fail("%s", why);
	if (pins.dir_fd < 0)
	{
		pce_info("nothing to unload: %s does not exist", pins.shown);
		return;
	}
	if (pce_policy_resume_interrupted(&pins, why, sizeof(why)) != 0)
		pce_fail("cannot finish an earlier cache_ext policy detach: %s", why);
	if (pce_pin_exists(&pins, PCE_PIN_POLICY_LINK) && pce_detach_policy(&pins, why, sizeof(why)) != 0)
		pce_fail("cannot detach the cache_ext policy: %s", why);
	/* the tracker's links first, so its programs stop before their maps go */
	pce_unpin_tracker_links(&pins);
	if (pce_pins_remove_all(&pins, cluster_id, why, sizeof(why)) != 0)
		pce_fail("%s", why);
	if (pins.foreign_left)
		pce_info("unloaded: removed the loader's pins; %s stays: it holds entries the loader did not make",
			 pins.shown);
	else
		pce_info("unloaded: removed %s", pins.shown);
}

static int
open_pin(const char *name)
{
	char		path[PATH_MAX];
	int			fd = bpf_obj_get(pce_pin_path(&pins, name, path, sizeof(path)));

	if (fd < 0)
		pce_fail("cannot open \"%s/%s\": %s", pins.shown, name, strerror(errno));
	return fd;
}

static void
show_counters(int stats_fd)
{
	static const char *const stat_names[PCE_STAT__COUNT] = PCE_STAT_NAMES;
	int			ncpu = libbpf_num_possible_cpus();
	__u64	   *percpu = calloc(ncpu > 0 ? ncpu : 1, sizeof(__u64));

	for (__u32 i = 0; percpu && i < PCE_STAT__COUNT; i++)
	{
		__u64		sum = 0;

		if (bpf_map_lookup_elem(stats_fd, &i, percpu) == 0)
			for (int c = 0; c < ncpu; c++)
				sum += percpu[c];
		if (stat_names[i])		/* an unused counter has no name */
			printf("stat %s %llu\n", stat_names[i], (unsigned long long) sum);
	}
	free(percpu);
}

/*
 * Text from the maps (the server's group writes them) or the configuration
 * files, made printable: control characters become '?', so that nothing
 * read can move a terminal's cursor or forge a line of output.
 */
static const char *
printable(const char *in, char *out, size_t outlen)
{
	size_t		n = 0;

	for (; *in && n + 1 < outlen; in++)
		out[n++] = ((unsigned char) *in < 0x20 || *in == 0x7f) ? '?' : *in;
	out[n] = '\0';
	return out;
}

/* --show: the marked PIDs and the counters, for people and tests. */
static void
do_show(void)
{
	char		why[PATH_MAX + 256];
	int			pids_fd, stats_fd, info_fd, knobs_fd;
	struct pce_knobs k;
	__u32		key,
				next,
			   *prev = NULL;
	struct pce_scan_mark mark;
	struct pce_loader_info li;
	char		text[sizeof(li.reason)];

	if (pce_pins_open(opt.bpffs_dir, cluster_id, PCE_PINS_READ, 0, NULL, &pins, why, sizeof(why)) != 0)
		pce_fail("%s", why);
	if (pins.dir_fd < 0)
		pce_fail("cannot open \"%s\": %s", pins.shown, strerror(ENOENT));
	pids_fd = open_pin(PCE_PIN_SCAN_PIDS);
	stats_fd = open_pin(PCE_PIN_STATS);
	info_fd = open_pin(PCE_PIN_LOADER_INFO);
	knobs_fd = open_pin(PCE_PIN_KNOBS);
	key = 0;
	if (bpf_map_lookup_elem(knobs_fd, &key, &k) == 0)
		printf("knobs tracking %u promote_on_access %u scan_min_percent %u\n",
			   k.tracking, k.promote_on_access, k.scan_min_percent);
	if (read_loader_info(info_fd, &li))
		printf("mechanism %s\nreason %s\n",
			   li.mechanism == PCE_MECH_CACHE_EXT ? "cache_ext" :
			   li.mechanism == PCE_MECH_STOCK ? "stock" : "none",
			   printable(li.reason, text, sizeof(text)));
	while (bpf_map_get_next_key(pids_fd, prev, &next) == 0)
	{
		if (bpf_map_lookup_elem(pids_fd, &next, &mark) == 0)
			printf("pid %u reason %u relid %u root %u\n", next, mark.reason, mark.relid, mark.root_pid);
		key = next;
		prev = &key;
	}
	show_counters(stats_fd);
}

/* What this run will do, decided before anything changes. */
struct plan
{
	bool		has_cache_ext;
	bool		want_cache_ext;
	char		has_why[256];
	const char *cgroup;			/* as asked for (or found), NULL if none */
	int			cgroup_fd;		/* opened once, -1 if none */
	char		cgroup_name[PATH_MAX];	/* what the kernel calls the opened cgroup */
	char		cgroup_why[PATH_MAX + 256];	/* why it could not be opened */
};

static void
decide(struct plan *pl)
{
	memset(pl, 0, sizeof(*pl));
	pl->cgroup_fd = -1;
	pl->has_cache_ext = pce_kernel_btf_has_cache_ext_ops(pl->has_why, sizeof(pl->has_why));
	/* mode off is the server's switch, at reload: load as for auto */
	pl->want_cache_ext = strcmp(opt.mode, "cache_ext") == 0 ||
		(strcmp(opt.mode, "stock") != 0 && pl->has_cache_ext);
	if (!pl->want_cache_ext)
		return;
	pl->cgroup = opt.cgroup ? opt.cgroup : own_cgroup_v2();
	if (!pl->cgroup)
		snprintf(pl->cgroup_why, sizeof(pl->cgroup_why), "no cgroup v2 directory found (cgroup v1 only?)");
	else
		pl->cgroup_fd = pce_open_cgroup(pl->cgroup, pl->cgroup_name, sizeof(pl->cgroup_name),
										pl->cgroup_why, sizeof(pl->cgroup_why));
	if (pl->cgroup_fd < 0 && opt.cgroup)
		pce_fail("%s", pl->cgroup_why);	/* asked for by name: never another one */
}

/* Is the pin root's parent a bpffs (now)? */
static bool
bpffs_mounted_at_parent(void)
{
	char		parent[PATH_MAX];
	struct statfs fs;

	pce_bpffs_parent(opt.bpffs_dir, parent, sizeof(parent));
	return statfs(parent, &fs) == 0 && fs.f_type == BPF_FS_MAGIC;
}

static void
do_check(const struct plan *pl)
{
	struct utsname u;
	char		why[PATH_MAX + 256];

	if (pce_pins_open(opt.bpffs_dir, cluster_id, PCE_PINS_READ, 0, NULL, &pins, why, sizeof(why)) != 0)
		pce_fail("%s", why);
	uname(&u);
	printf("kernel:            %s\n", u.release);
	printf("cache_ext:         %s (%s)\n", pl->has_cache_ext ? "yes" : "no", pl->has_why);
	printf("bpffs:             %s\n", bpffs_mounted_at_parent() ? "mounted" :
		   "not mounted yet (the loader mounts its own when it may)");
	printf("cluster id:        %s\n", cluster_id);
	printf("pin directory:     %s (%s)\n", pins.shown,
		   pins.dir_fd >= 0 ? "exists, maps would be reused" : "would be created");
	for (int i = 0; i < PCE_CONF__COUNT; i++)
		if (cluster_conf.where[i][0])
		{
			char		value[PCE_CONF_VALUE_MAX];
			char		where[PCE_CONF_WHERE_MAX];

			printf("configuration:     %s = '%s' (%s)\n", pce_conf_names[i],
				   printable(cluster_conf.value[i], value, sizeof(value)),
				   printable(cluster_conf.where[i], where, sizeof(where)));
		}
	printf("mode:              %s%s\n", opt.mode, opt.mode_given ? " (command line)" : "");
	printf("would load:        %s\n", pl->want_cache_ext ? "cache_ext policy" : "stock-kernel tracker");
	if (pl->want_cache_ext)
		printf("cgroup:            %s\n", pl->cgroup_fd >= 0 ? pl->cgroup_name : pl->cgroup_why);
	for (enum pce_read_hook h = opt.read_hook; h != PCE_READ_HOOK_NONE; h++)
		printf("read hook:         %s (%s)\n", pce_read_hook_attach_point(h),
			   pce_kernel_has_read_hook(h) ? "in the kernel's BTF; whether it is accepted is seen at load" :
			   "not in the kernel's BTF");
	printf("read hook:         none (last: promotion by activation, no readers' positions)\n");
	printf("running as root:   %s\n", geteuid() == 0 ? "yes" : "no (required to load)");
}

/*
 * The cluster's account, whose tasks alone the BPF side may take for I/O
 * workers and whose files alone for a scan's (maps.bpf.h): the data
 * directory's owner, verified to be --user (open_datadir); with
 * --cluster-id alone, --user, root's own argument.  Never root: 0 means
 * "no cluster" to the BPF side.
 */
static uid_t
cluster_uid(void)
{
	if (cluster_owner.set)
		return cluster_owner.uid;
	return user_account(NULL);
}

/*
 * A rerun in cache_ext mode on the cgroup the policy already serves: keep
 * it (lists and pages untouched).  Returns true when kept; detaches it when
 * it must move.
 */
static bool
keep_attached_policy(struct tracker_bpf *tracker, const struct plan *pl)
{
	char		why[512];

	if (!pl->want_cache_ext || pl->cgroup_fd < 0 || !pce_pin_exists(&pins, PCE_PIN_POLICY_LINK))
		return false;
	/* the link's cgroup, as the kernel says: loader_info is the server group's to write */
	if (pce_policy_serves_cgroup(&pins, pl->cgroup_fd))
	{
		snprintf(why, sizeof(why), "cache_ext policy attached to %s (kept from an earlier run)",
				 pl->cgroup_name);
		pce_unpin_tracker_links(&pins);
		write_loader_info(pce_tracker_loader_info(tracker), PCE_MECH_CACHE_EXT, pl->cgroup_name, why);
		fix_pin_permissions();
		pce_info("cluster %s: cache_ext policy already attached to %s: kept (lists and pages untouched)",
			 cluster_id, pl->cgroup_name);
		return true;
	}
	if (pce_detach_policy(&pins, why, sizeof(why)) != 0)
		pce_fail("cannot detach the policy to move it to %s: %s", pl->cgroup_name, why);
	return false;
}

/*
 * The stock-kernel tracker with its links, from the first read hook asked
 * for (read_hook and promotion_missing say what is in place).
 */
static struct tracker_bpf *
install_stock_tracker(void)
{
	read_hook = opt.read_hook;
	return pce_install_tracker(&pins, cluster_uid(), &read_hook, promotion_missing,
							   sizeof(promotion_missing));
}

/*
 * cache_ext wanted: attach the policy, or say why the tracker stays.  The
 * tracker was loaded for its maps alone (pce_load_tracker_maps); when the
 * policy is refused, *tracker is replaced by the attached stock tracker.
 */
static enum pce_mechanism
install_policy(struct tracker_bpf **tracker, const struct plan *pl, char *reason, size_t reasonlen)
{
	char		why[PATH_MAX + 256];

	snprintf(why, sizeof(why), "%s", pl->cgroup_why);
	if (pl->cgroup_fd >= 0 &&
		pce_attach_policy(&pins, pl->cgroup_fd, pl->cgroup_name, cluster_uid(), why, sizeof(why)) == 0)
	{
		pce_unpin_tracker_links(&pins);
		snprintf(reason, reasonlen, "cache_ext policy attached to %s", pl->cgroup_name);
		return PCE_MECH_CACHE_EXT;
	}
	pce_tracker_destroy(*tracker);
	*tracker = install_stock_tracker();
	if (strcmp(opt.mode, "cache_ext") == 0)
	{
		/* explicit request: leave the tracker in place, report failure */
		write_loader_info(pce_tracker_loader_info(*tracker), PCE_MECH_STOCK, NULL, why);
		fix_pin_permissions();
		pce_fail("cannot attach the cache_ext policy: %s (the stock-kernel tracker stays active)", why);
	}
	snprintf(reason, reasonlen, "cache_ext policy failed, using the stock-kernel tracker: %s", why);
	return PCE_MECH_STOCK;
}

/* the stock tracker wanted: drop a policy left from an earlier run */
static enum pce_mechanism
install_stock(const struct plan *pl, char *reason, size_t reasonlen)
{
	char		why[512];

	if (pl->has_cache_ext)
		snprintf(reason, reasonlen, "stock-kernel tracker requested by --mode=%s", opt.mode);
	else
		snprintf(reason, reasonlen, "kernel has no cache_ext: stock-kernel tracker");
	if (pce_pin_exists(&pins, PCE_PIN_POLICY_LINK) && pce_detach_policy(&pins, why, sizeof(why)) != 0)
		pce_fail("cannot detach the previous cache_ext policy: %s", why);
	return PCE_MECH_STOCK;
}

/*
 * The server finds its pins by path, as the cluster's owner: a directory on
 * the way that it may not search (systemd mounts /sys/fs/bpf with mode 0700)
 * leaves it idle, so say so now and load nothing.
 */
static void
check_server_reaches_pins(void)
{
	int			fd;

	if (!cluster_owner.set)
		return;					/* --cluster-id alone: no account known */
	fd = pce_openat2_as(&cluster_owner, AT_FDCWD, pins.shown, O_PATH | O_DIRECTORY, 0);
	if (fd >= 0)
	{
		close(fd);
		return;
	}
	if (errno == EACCES)
		pce_fail("the cluster's account \"%s\" cannot reach %s: a directory on the way is not searchable "
			 "for it (systemd mounts /sys/fs/bpf with mode 0700); keep the pins on a bpffs it can reach, "
			 "e.g. the default --bpffs-dir %s, which the loader mounts itself (do not loosen /sys/fs/bpf)",
			 opt.user, pins.shown, PCE_DEFAULT_BPFFS_DIR);
}

static void
do_install(const struct plan *pl)
{
	char		why[PATH_MAX + 256];
	char		reason[PATH_MAX + 512];
	gid_t		server_gid = server_group();
	uid_t		owner_uid = cluster_uid();	/* refused before any pin is made */
	struct tracker_bpf *tracker;
	enum pce_mechanism mech;

	if (pce_pins_open(opt.bpffs_dir, cluster_id, PCE_PINS_INSTALL, server_gid, bound_to(), &pins, why, sizeof(why)) != 0)
		pce_fail("%s", why);
	if (pce_policy_resume_interrupted(&pins, why, sizeof(why)) != 0)
		pce_fail("cannot finish an earlier cache_ext policy detach: %s", why);
	check_server_reaches_pins();

	/*
	 * The tracker object owns the map definitions; load it first in every
	 * mode so that the maps exist with their final layout.  In cache_ext
	 * mode its tracking programs are attached only if the policy is
	 * refused (install_policy).
	 */
	tracker = pl->want_cache_ext ? pce_load_tracker_maps(&pins, owner_uid) : install_stock_tracker();
	if (keep_attached_policy(tracker, pl))
	{
		pce_tracker_destroy(tracker);
		return;
	}
	mech = pl->want_cache_ext ? install_policy(&tracker, pl, reason, sizeof(reason))
		: install_stock(pl, reason, sizeof(reason));
	if (mech == PCE_MECH_STOCK && promotion_missing[0])
		snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
				 " (without promotion: %s)", promotion_missing);
	write_loader_info(pce_tracker_loader_info(tracker), mech,
					  mech == PCE_MECH_CACHE_EXT ? pl->cgroup_name : NULL, reason);
	fix_pin_permissions();
	if (mech == PCE_MECH_STOCK && read_hook == PCE_READ_HOOK_NONE)
		pce_info("no read hook: the readers' positions are not seen (promotion by activation)");
	else if (mech == PCE_MECH_STOCK)
		pce_info("reads are seen by %s", pce_read_hook_attach_point(read_hook));
	pce_info("cluster %s: %s; pins in %s (maps group %s, mode 0660; links root's)", cluster_id, reason,
			 pins.shown, opt.group);
	pce_tracker_destroy(tracker);
}

int
main(int argc, char **argv)
{
	char		why[512];
	struct plan pl;

	if (pce_parse_loader_options(argc, argv, &opt, why, sizeof(why)) != 0)
		pce_fail("%s", why);
	if (opt.help)
	{
		usage();
		return 0;
	}
	libbpf_set_print(libbpf_print);
	pce_tracker_set_verbose(opt.verbose);
	apply_cluster_config();
	resolve_cluster_id();
	if (opt.show)
	{
		do_show();
		return 0;
	}
	if (opt.unload)
	{
		if (geteuid() != 0)
			pce_fail("must be run as root (it removes BPF pins); the server itself needs no privileges");
		do_unload();
		return 0;
	}
	decide(&pl);
	if (opt.check)
	{
		do_check(&pl);
		return geteuid() == 0 ? 0 : 1;
	}
	if (geteuid() != 0)
		pce_fail("must be run as root (it creates BPF maps and programs); the server itself needs no privileges");
	do_install(&pl);
	pce_pins_close(&pins);
	return 0;
}
