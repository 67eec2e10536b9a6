/*
 * pg_cache_ext_loader.c
 *		The privileged half of pg_cache_ext: a one-shot program, run as root
 *		(typically ExecStartPre of the cluster's systemd unit), that loads the
 *		BPF side for one cluster, pins it, and exits.
 *
 * Everything it creates lives below <bpffs>/pg_cache_ext/<cluster id>/,
 * where the cluster id is the cluster's system identifier (the first field
 * of global/pg_control, what GetSystemIdentifier() returns in the server):
 *
 *	scan_pids, stats, knobs, loader_info	maps shared by every mechanism
 *	folio_events							ring buffer (stock mechanism)
 *	tracker_link, tracker_remove_link		tracepoint links (stock mechanism)
 *	tracker_activate_link					tracepoint link for promotion (stock mechanism)
 *	policy_link								struct_ops link (cache_ext mechanism)
 *
 * Pins are group "postgres" (or --group), mode 0660, so the unprivileged
 * server can open and update the maps; the directory is mode 0750.
 *
 * Maps are pinned by name, so a second run reuses them (marks and counters
 * survive); programs and links are replaced: the new link is pinned under a
 * temporary name and renamed over the old one, so there is no moment without
 * a mechanism.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
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
#include "tracker.skel.h"
#include "config.h"
#include "options.h"
#include "policy.h"

static struct pce_loader_options opt;

static char cluster_id[32];
static char pin_dir[PATH_MAX];
static gid_t pin_gid;

static void
fail(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "pg_cache_ext_loader: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void
info(const char *fmt,...)
{
	va_list		ap;

	printf("pg_cache_ext_loader: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

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
		   "      --cluster-id=ID      use this cluster id instead of reading DATADIR\n"
		   "      --bpffs-dir=DIR      pin root (default %s)\n"
		   "      --group=GROUP        group that may use the pins (default postgres)\n"
		   "      --mode=MODE          auto, stock or cache_ext (default auto)\n"
		   "      --cgroup=PATH        cgroup v2 directory for the cache_ext policy\n"
		   "                           (default: the loader's own cgroup)\n"
		   "      --config-file=FILE   the server's postgresql.conf (default DATADIR/postgresql.conf)\n"
		   "      --check              report what would be done, change nothing\n"
		   "      --unload             detach everything and remove the pins\n"
		   "      --show               print marked PIDs and counters (needs no root)\n"
		   "  -v, --verbose            print libbpf's debug output\n"
		   "  -h, --help               show this help\n\n"
		   "pg_cache_ext.mode, pg_cache_ext.bpffs_dir and pg_cache_ext.cgroup are read from\n"
		   "the configuration file and DATADIR/postgresql.auto.conf; the command line wins.\n",
		   PCE_DEFAULT_BPFFS_DIR);
}

/* What the configuration files said, for --check. */
static struct pce_loader_config cluster_conf;

/*
 * Take pg_cache_ext.mode, .bpffs_dir and .cgroup from the server's
 * configuration files, so that they are set in one place; options given on
 * the command line win.  Values are checked as strictly as the options.
 */
static void
apply_cluster_config(void)
{
	static char conf_path[PATH_MAX];
	static char auto_path[PATH_MAX];
	char		why[PATH_MAX + 256];
	const char *v;

	if (!opt.datadir)
		return;					/* --cluster-id alone: nothing to read */
	snprintf(auto_path, sizeof(auto_path), "%s/postgresql.auto.conf", opt.datadir);
	if (opt.config_file)
		snprintf(conf_path, sizeof(conf_path), "%s", opt.config_file);
	else
		snprintf(conf_path, sizeof(conf_path), "%s/postgresql.conf", opt.datadir);
	if (pce_read_config_file(conf_path, opt.config_file == NULL, &cluster_conf, why, sizeof(why)) != 0 ||
		pce_read_config_file(auto_path, true, &cluster_conf, why, sizeof(why)) != 0)
		fail("%s", why);

	v = cluster_conf.value[PCE_CONF_MODE];
	if (v[0] && !opt.mode_given)
	{
		if (!pce_valid_mode(v))
			fail("%s: invalid pg_cache_ext.mode \"%.64s\": use auto, stock, cache_ext or off",
				 cluster_conf.where[PCE_CONF_MODE], v);
		opt.mode = v;
	}
	v = cluster_conf.value[PCE_CONF_BPFFS_DIR];
	if (v[0] && !opt.bpffs_dir_given)
	{
		if (!pce_valid_abs_path(v))
			fail("%s: invalid pg_cache_ext.bpffs_dir \"%.64s\": must be an absolute path without \"..\"",
				 cluster_conf.where[PCE_CONF_BPFFS_DIR], v);
		opt.bpffs_dir = v;
	}
	v = cluster_conf.value[PCE_CONF_CGROUP];
	if (v[0] && !opt.cgroup)
	{
		if (!pce_valid_abs_path(v))
			fail("%s: invalid pg_cache_ext.cgroup \"%.64s\": must be an absolute path without \"..\"",
				 cluster_conf.where[PCE_CONF_CGROUP], v);
		opt.cgroup = v;
	}
}

/* The cluster id: the system identifier at the start of global/pg_control. */
static void
resolve_cluster_id(void)
{
	char		path[PATH_MAX];
	uint64_t	sysid;
	int			fd;

	if (opt.cluster_id)
	{
		/* validated by pce_parse_loader_options() */
		snprintf(cluster_id, sizeof(cluster_id), "%s", opt.cluster_id);
		return;
	}
	snprintf(path, sizeof(path), "%s/global/pg_control", opt.datadir);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("cannot open \"%s\": %s (is -D a PostgreSQL data directory?)", path, strerror(errno));
	if (read(fd, &sysid, sizeof(sysid)) != sizeof(sysid))
		fail("cannot read the system identifier from \"%s\"", path);
	close(fd);
	snprintf(cluster_id, sizeof(cluster_id), "%llu", (unsigned long long) sysid);
}

/* Is the parent of the pin root a mounted bpffs? */
static bool
bpffs_mounted(const char *dir, char *why, size_t whylen)
{
	char		parent[PATH_MAX];
	struct statfs st;
	char	   *slash;

	snprintf(parent, sizeof(parent), "%s", dir);
	slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = '\0';
	if (statfs(parent, &st) != 0)
	{
		snprintf(why, whylen, "%s: %s", parent, strerror(errno));
		return false;
	}
	if (st.f_type != BPF_FS_MAGIC)
	{
		snprintf(why, whylen, "%s is not a bpffs mount (mount -t bpf bpf %s)", parent, parent);
		return false;
	}
	return true;
}

static void
make_dir(const char *path, mode_t mode, gid_t gid)
{
	if (mkdir(path, mode) != 0 && errno != EEXIST)
		fail("cannot create \"%s\": %s", path, strerror(errno));
	if (chown(path, 0, gid) != 0 || chmod(path, mode) != 0)
		fail("cannot set owner/mode of \"%s\": %s", path, strerror(errno));
}

/* Give every pin in the cluster's directory group access, nothing more. */
static void
fix_pin_permissions(void)
{
	DIR		   *d = opendir(pin_dir);
	struct dirent *de;
	char		path[PATH_MAX];

	if (!d)
		fail("cannot open \"%s\": %s", pin_dir, strerror(errno));
	while ((de = readdir(d)) != NULL)
	{
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", pin_dir, de->d_name);
		if (chown(path, 0, pin_gid) != 0 || chmod(path, 0660) != 0)
			fail("cannot set owner/mode of \"%s\": %s", path, strerror(errno));
	}
	closedir(d);
}

static bool
pin_exists(const char *name)
{
	char		path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	return access(path, F_OK) == 0;
}

/* Pin a link under a temporary name, then rename it over the old one. */
static void
pin_link_replacing(struct bpf_link *link, const char *name)
{
	char		path[PATH_MAX];
	char		tmp[PATH_MAX];
	int			err;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	snprintf(tmp, sizeof(tmp), "%s/%s_new", pin_dir, name);
	unlink(tmp);
	err = bpf_link__pin(link, tmp);
	if (err)
		fail("cannot pin link \"%s\": %s", tmp, strerror(-err));
	if (rename(tmp, path) != 0)
		fail("cannot rename \"%s\" to \"%s\": %s", tmp, path, strerror(errno));
}

static void
unpin(const char *name)
{
	char		path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	if (unlink(path) != 0 && errno != ENOENT)
		fail("cannot remove \"%s\": %s", path, strerror(errno));
}

static void
write_loader_info(struct bpf_map *map, enum pce_mechanism mech, bool has_cache_ext,
				  const char *cgroup, const char *reason)
{
	struct pce_loader_info li;
	__u32		key = 0;

	memset(&li, 0, sizeof(li));
	li.abi_version = PCE_ABI_VERSION;
	li.mechanism = mech;
	li.kernel_has_cache_ext = has_cache_ext;
	li.loader_pid = getpid();
	li.loaded_at_unix = time(NULL);
	snprintf(li.cgroup, sizeof(li.cgroup), "%s", cgroup ? cgroup : "");
	snprintf(li.reason, sizeof(li.reason), "%s", reason);
	if (bpf_map_update_elem(bpf_map__fd(map), &key, &li, BPF_ANY) != 0)
		fail("cannot write loader_info: %s", strerror(errno));
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

/* Knobs get defaults only the first time; later the module owns them. */
static void
init_knobs(struct bpf_map *map)
{
	struct pce_knobs k;
	__u32		key = 0;
	int			fd = bpf_map__fd(map);

	if (bpf_map_lookup_elem(fd, &key, &k) == 0 && k.abi_version == PCE_ABI_VERSION)
		return;
	memset(&k, 0, sizeof(k));
	k.abi_version = PCE_ABI_VERSION;
	k.tracking = 1;
	k.promote_on_access = 1;
	k.scan_min_percent = 5;
	if (bpf_map_update_elem(fd, &key, &k, BPF_ANY) != 0)
		fail("cannot initialise knobs: %s", strerror(errno));
}

/* Why scan folios cannot be promoted on this kernel, or "" when they can. */
static char promotion_missing[160];

/*
 * Load the tracker (stock-kernel mechanism), reusing pinned maps, attach
 * its tracepoints and pin the links.  Promotion (the program on
 * tp_btf/mm_lru_activate) is optional: on a kernel that lacks that
 * tracepoint, or refuses the attachment, the tracker runs without it and
 * the loader says so.
 */
static struct tracker_bpf *
load_tracker(void)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = pin_dir);
	struct tracker_bpf *skel;
	struct bpf_link *add_link;
	struct bpf_link *remove_link;
	struct bpf_link *activate_link = NULL;
	bool		can_promote;
	int			err;

	skel = tracker_bpf__open_opts(&oo);
	if (!skel)
		fail("cannot open the tracker BPF object: %s", strerror(errno));
	can_promote = libbpf_find_vmlinux_btf_id("mm_lru_activate", BPF_TRACE_RAW_TP) > 0;
	if (!can_promote)
	{
		snprintf(promotion_missing, sizeof(promotion_missing),
				 "the kernel has no mm_lru_activate tracepoint");
		bpf_program__set_autoload(skel->progs.on_folio_activated, false);
	}
	err = tracker_bpf__load(skel);
	if (err)
		fail("the kernel refused the tracker program (%s); run with -v for the verifier log",
			 strerror(-err));
	add_link = bpf_program__attach(skel->progs.on_page_cache_add);
	if (!add_link)
		fail("cannot attach tp_btf/mm_filemap_add_to_page_cache: %s", strerror(errno));
	remove_link = bpf_program__attach(skel->progs.on_page_cache_delete);
	if (!remove_link)
		fail("cannot attach tp_btf/mm_filemap_delete_from_page_cache: %s", strerror(errno));
	if (can_promote)
	{
		activate_link = bpf_program__attach(skel->progs.on_folio_activated);
		if (!activate_link)
			snprintf(promotion_missing, sizeof(promotion_missing),
					 "cannot attach tp_btf/mm_lru_activate: %s", strerror(errno));
	}
	if (promotion_missing[0])
		info("scan pages will not be promoted: %s", promotion_missing);
	pin_link_replacing(add_link, PCE_PIN_TRACKER_LINK);
	pin_link_replacing(remove_link, PCE_PIN_TRACKER_REMOVE_LINK);
	if (activate_link)
		pin_link_replacing(activate_link, PCE_PIN_TRACKER_ACTIVATE_LINK);
	else
		unpin(PCE_PIN_TRACKER_ACTIVATE_LINK);
	init_knobs(skel->maps.knobs);
	return skel;
}

/* In cache_ext mode the policy does the tracker's work: stop the tracker. */
static void
unpin_tracker_links(void)
{
	unpin(PCE_PIN_TRACKER_LINK);
	unpin(PCE_PIN_TRACKER_REMOVE_LINK);
	unpin(PCE_PIN_TRACKER_ACTIVATE_LINK);
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

static void
do_unload(void)
{
	char		why[256];
	DIR		   *d;
	struct dirent *de;

	if (access(pin_dir, F_OK) != 0)
	{
		info("nothing to unload: %s does not exist", pin_dir);
		return;
	}
	if (pin_exists(PCE_PIN_POLICY_LINK) && pce_detach_policy(pin_dir, why, sizeof(why)) != 0)
		fail("cannot detach the cache_ext policy: %s", why);
	/* the tracker's links first, so its programs stop before their maps go */
	unpin_tracker_links();
	d = opendir(pin_dir);
	while (d && (de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			unpin(de->d_name);
	if (d)
		closedir(d);
	if (rmdir(pin_dir) != 0)
		fail("cannot remove \"%s\": %s", pin_dir, strerror(errno));
	info("unloaded: removed %s", pin_dir);
}

static int
open_pin(const char *name)
{
	char		path[PATH_MAX];
	int			fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		fail("cannot open \"%s\": %s", path, strerror(errno));
	return fd;
}

/* --show: the marked PIDs and the counters, for people and tests. */
static void
do_show(void)
{
	int			pids_fd = open_pin(PCE_PIN_SCAN_PIDS);
	int			stats_fd = open_pin(PCE_PIN_STATS);
	int			info_fd = open_pin(PCE_PIN_LOADER_INFO);
	int			knobs_fd = open_pin(PCE_PIN_KNOBS);
	struct pce_knobs k;
	int			ncpu = libbpf_num_possible_cpus();
	__u32		key,
				next,
			   *prev = NULL;
	struct pce_scan_mark mark;
	struct pce_loader_info li;
	__u64	   *percpu = calloc(ncpu, sizeof(__u64));
	static const char *const stat_names[PCE_STAT__COUNT] = PCE_STAT_NAMES;

	key = 0;
	if (bpf_map_lookup_elem(knobs_fd, &key, &k) == 0)
		printf("knobs tracking %u promote_on_access %u scan_min_percent %u\n",
			   k.tracking, k.promote_on_access, k.scan_min_percent);
	if (read_loader_info(info_fd, &li))
		printf("mechanism %s\nreason %s\n",
			   li.mechanism == PCE_MECH_CACHE_EXT ? "cache_ext" :
			   li.mechanism == PCE_MECH_STOCK ? "stock" : "none", li.reason);
	while (bpf_map_get_next_key(pids_fd, prev, &next) == 0)
	{
		if (bpf_map_lookup_elem(pids_fd, &next, &mark) == 0)
			printf("pid %u reason %u relid %u\n", next, mark.reason, mark.relid);
		key = next;
		prev = &key;
	}
	for (__u32 i = 0; i < PCE_STAT__COUNT; i++)
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

int
main(int argc, char **argv)
{
	char		why[512];
	char		reason[256];
	bool		has_cache_ext;
	bool		want_cache_ext;
	const char *cgroup = NULL;
	struct group *gr;
	struct tracker_bpf *tracker = NULL;
	enum pce_mechanism mech = PCE_MECH_NONE;

	if (pce_parse_loader_options(argc, argv, &opt, why, sizeof(why)) != 0)
		fail("%s", why);
	if (opt.help)
	{
		usage();
		return 0;
	}

	libbpf_set_print(libbpf_print);
	apply_cluster_config();
	resolve_cluster_id();
	snprintf(pin_dir, sizeof(pin_dir), "%s/%s", opt.bpffs_dir, cluster_id);

	if (opt.show)
	{
		do_show();
		return 0;
	}

	if (!bpffs_mounted(opt.bpffs_dir, why, sizeof(why)))
		fail("bpffs is not mounted: %s", why);
	has_cache_ext = pce_kernel_has_cache_ext(why, sizeof(why));
	/* mode off is the server's switch, at reload: load as for auto */
	want_cache_ext = strcmp(opt.mode, "cache_ext") == 0 ||
		(strcmp(opt.mode, "stock") != 0 && has_cache_ext);
	if (want_cache_ext)
		cgroup = opt.cgroup ? opt.cgroup : own_cgroup_v2();

	if (opt.check)
	{
		struct utsname u;

		uname(&u);
		printf("kernel:            %s\n", u.release);
		printf("cache_ext:         %s (%s)\n", has_cache_ext ? "yes" : "no", why);
		printf("bpffs:             mounted\n");
		printf("cluster id:        %s\n", cluster_id);
		printf("pin directory:     %s (%s)\n", pin_dir,
			   access(pin_dir, F_OK) == 0 ? "exists, maps would be reused" : "would be created");
		for (int i = 0; i < PCE_CONF__COUNT; i++)
			if (cluster_conf.where[i][0])
				printf("configuration:     %s = '%s' (%s)\n", pce_conf_names[i],
					   cluster_conf.value[i], cluster_conf.where[i]);
		printf("mode:              %s%s\n", opt.mode, opt.mode_given ? " (command line)" : "");
		printf("would load:        %s\n", want_cache_ext ? "cache_ext policy" : "stock-kernel tracker");
		if (want_cache_ext)
			printf("cgroup:            %s\n", cgroup ? cgroup : "(none found)");
		printf("running as root:   %s\n", geteuid() == 0 ? "yes" : "no (required to load)");
		return geteuid() == 0 ? 0 : 1;
	}

	if (geteuid() != 0)
		fail("must be run as root (it creates BPF maps and programs); the server itself needs no privileges");

	if (opt.unload)
	{
		do_unload();
		return 0;
	}

	gr = getgrnam(opt.group);
	if (!gr)
		fail("group \"%s\" does not exist (--group names the group the server runs in)", opt.group);
	pin_gid = gr->gr_gid;

	make_dir(opt.bpffs_dir, 0755, 0);
	make_dir(pin_dir, 0750, pin_gid);

	/*
	 * The tracker object owns the map definitions; load it first in every
	 * mode so that the maps exist with their final layout.  In cache_ext
	 * mode its links are removed again once the policy is attached.
	 */
	tracker = load_tracker();

	if (want_cache_ext && cgroup && pin_exists(PCE_PIN_POLICY_LINK))
	{
		struct pce_loader_info old = {0};

		/* a rerun: keep the policy on the same cgroup, move it otherwise */
		if (read_loader_info(bpf_map__fd(tracker->maps.loader_info), &old) &&
			old.mechanism == PCE_MECH_CACHE_EXT && strcmp(old.cgroup, cgroup) == 0)
		{
			unpin_tracker_links();
			write_loader_info(tracker->maps.loader_info, PCE_MECH_CACHE_EXT, has_cache_ext,
							  cgroup, old.reason);
			fix_pin_permissions();
			info("cluster %s: cache_ext policy already attached to %s: kept (lists and pages untouched)",
				 cluster_id, cgroup);
			tracker_bpf__destroy(tracker);
			return 0;
		}
		if (pce_detach_policy(pin_dir, why, sizeof(why)) != 0)
			fail("cannot detach the policy on %s to move it to %s: %s", old.cgroup, cgroup, why);
	}

	if (want_cache_ext)
	{
		if (!cgroup)
			snprintf(why, sizeof(why), "no cgroup v2 directory found (cgroup v1 only?)");
		if (cgroup && pce_attach_policy(pin_dir, cgroup, why, sizeof(why)) == 0)
		{
			unpin_tracker_links();
			mech = PCE_MECH_CACHE_EXT;
			snprintf(reason, sizeof(reason), "cache_ext policy attached to %s", cgroup);
		}
		else if (strcmp(opt.mode, "cache_ext") == 0)
		{
			/* explicit request: leave the tracker in place, report failure */
			write_loader_info(tracker->maps.loader_info, PCE_MECH_STOCK, has_cache_ext, NULL, why);
			fix_pin_permissions();
			fail("cannot attach the cache_ext policy: %s (the stock-kernel tracker stays active)", why);
		}
		else
		{
			mech = PCE_MECH_STOCK;
			snprintf(reason, sizeof(reason), "cache_ext policy failed, using the stock-kernel tracker: %s", why);
		}
	}
	else
	{
		mech = PCE_MECH_STOCK;
		if (has_cache_ext)
			snprintf(reason, sizeof(reason), "stock-kernel tracker requested by --mode=%s", opt.mode);
		else
			snprintf(reason, sizeof(reason), "kernel has no cache_ext: stock-kernel tracker");
		if (pin_exists(PCE_PIN_POLICY_LINK))
		{
			if (pce_detach_policy(pin_dir, why, sizeof(why)) != 0)
				fail("cannot detach the previous cache_ext policy: %s", why);
		}
	}

	if (mech == PCE_MECH_STOCK && promotion_missing[0])
		snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
				 " (without promotion: %s)", promotion_missing);
	write_loader_info(tracker->maps.loader_info, mech, has_cache_ext,
					  mech == PCE_MECH_CACHE_EXT ? cgroup : NULL, reason);
	fix_pin_permissions();
	info("cluster %s: %s; pins in %s (group %s, mode 0660)", cluster_id, reason, pin_dir, opt.group);
	tracker_bpf__destroy(tracker);
	return 0;
}
