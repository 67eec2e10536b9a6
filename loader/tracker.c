/*
 * tracker.c
 *		The loader's stock-kernel part, beside policy.c: load the tracker
 *		(bpf/tracker.bpf.c) reusing the cluster's pinned maps, attach its
 *		tracepoints, pin the links root's alone (0600), give the knobs their
 *		defaults; and unpin its links when the cache_ext policy takes over.
 *
 * The tracker is loaded in every mode, so that the shared maps exist with
 * their final layout; in cache_ext mode only its fork link is attached
 * (pce_load_tracker_maps), and links left by an earlier stock-mode run are
 * removed once the policy is attached.  Failures end the run (pce_fail,
 * report.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/types.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pg_cache_ext.h"
#include "tracker.skel.h"
#include "pins.h"
#include "report.h"
#include "tracker.h"

/* Pin a link under a temporary name, then rename it over the old one. */
static void
pin_link_replacing(const struct pce_pins *pins, struct bpf_link *link, const char *name)
{
	char		tmp_name[128];
	char		tmp[PATH_MAX];
	char		why[PATH_MAX + 256];
	int			err;

	snprintf(tmp_name, sizeof(tmp_name), "%s_new", name);
	unlinkat(pins->dir_fd, tmp_name, 0);
	err = bpf_link__pin(link, pce_pin_path(pins, tmp_name, tmp, sizeof(tmp)));
	if (err)
		pce_fail("cannot pin link \"%s/%s\": %s", pins->shown, tmp_name, strerror(-err));
	if (pce_pin_keep_root(pins->dir_fd, tmp_name, why, sizeof(why)) != 0)
		pce_fail("%s", why);
	if (renameat(pins->dir_fd, tmp_name, pins->dir_fd, name) != 0)
		pce_fail("cannot rename \"%s/%s\" to \"%s\": %s", pins->shown, tmp_name, name, strerror(errno));
}

static void
unpin(const struct pce_pins *pins, const char *name)
{
	if (unlinkat(pins->dir_fd, name, 0) != 0 && errno != ENOENT)
		pce_fail("cannot remove \"%s/%s\": %s", pins->shown, name, strerror(errno));
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
	pce_knobs_defaults(&k);
	if (bpf_map_update_elem(fd, &key, &k, BPF_ANY) != 0)
		pce_fail("cannot initialise knobs: %s", strerror(errno));
}

/*
 * A map pinned by an earlier loader must have this loader's layout: libbpf
 * would refuse to reuse it with a vaguer error.  The scan marks' size
 * follows PCE_ABI_VERSION; the counters' number grows with new counters.
 * Nothing is lost by stopping here; --unload starts afresh.
 */
static void
check_pinned_map(const struct pce_pins *pins, const char *name, __u32 value_size, __u32 entries)
{
	struct bpf_map_info info;
	__u32		len = sizeof(info);
	char		path[PATH_MAX];
	int			fd;

	if (!pce_pin_exists(pins, name))
		return;
	fd = bpf_obj_get(pce_pin_path(pins, name, path, sizeof(path)));
	if (fd < 0)
		return;					/* the load below says why */
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		((value_size != 0 && info.value_size != value_size) ||
		 (entries != 0 && info.max_entries != entries)))
		pce_fail("the maps pinned in \"%s\" have another version's layout (%s: %u entries of %u bytes, "
				 "this loader's %u of %u, ABI %d): run pg_cache_ext_loader --unload for this cluster first",
				 pins->shown, name, info.max_entries, info.value_size,
				 entries ? entries : info.max_entries, value_size ? value_size : info.value_size,
				 PCE_ABI_VERSION);
	close(fd);
}

static void
check_pinned_layout(const struct pce_pins *pins)
{
	check_pinned_map(pins, PCE_PIN_SCAN_PIDS, sizeof(struct pce_scan_mark), 0);
	check_pinned_map(pins, PCE_PIN_STATS, 0, PCE_STAT__COUNT);
}

/*
 * Hand external marks down to new tasks (tp_btf/sched_process_fork), in
 * every mode: the cache_ext policy reads the same marks.  The link is left
 * in place when the policy replaces the other tracker links.
 */
static void
install_fork_link(const struct pce_pins *pins, struct tracker_bpf *skel, bool can_fork)
{
	struct bpf_link *fork_link = NULL;

	if (can_fork)
		fork_link = bpf_program__attach(skel->progs.on_process_fork);
	if (fork_link)
	{
		pin_link_replacing(pins, fork_link, PCE_PIN_TRACKER_FORK_LINK);
		return;
	}
	/* optional, as promotion: the rest works, pg_cache_ext_run says why not */
	pce_info("process trees of pg_cache_ext_run will not be marked: %s",
			 can_fork ? "cannot attach tp_btf/sched_process_fork" : "the kernel has no sched_process_fork tracepoint");
	unpin(pins, PCE_PIN_TRACKER_FORK_LINK);
}

/*
 * Pages written back on a scan's behalf (tp_btf/writeback_dirty_folio,
 * tracker.bpf.c) are recorded as the scan's.  Optional: without the
 * tracepoint they stay the kernel's, as before.
 */
static void
install_writeback_link(const struct pce_pins *pins, struct tracker_bpf *skel, bool can_dirty)
{
	struct bpf_link *link = NULL;

	if (can_dirty)
		link = bpf_program__attach(skel->progs.on_folio_dirtied);
	if (link)
	{
		pin_link_replacing(pins, link, PCE_PIN_TRACKER_WRITEBACK_LINK);
		return;
	}
	pce_info("pages written back on a scan's behalf will not count as the scan's: %s",
			 can_dirty ? "cannot attach tp_btf/writeback_dirty_folio" :
			 "the kernel has no writeback_dirty_folio tracepoint");
	unpin(pins, PCE_PIN_TRACKER_WRITEBACK_LINK);
}

/* The skeleton's program of a read hook (PCE_READ_HOOK_TABLE), NULL for none. */
static struct bpf_program *
read_hook_bpf_program(struct tracker_bpf *skel, enum pce_read_hook hook)
{
	if (hook == PCE_READ_HOOK_TRACEPOINT)
		return skel->progs.on_file_read;
	if (hook == PCE_READ_HOOK_FENTRY)
		return skel->progs.on_filemap_read;
	return NULL;
}

/* A read hook's row of PCE_READ_HOOK_TABLE. */
struct read_hook_row
{
	const char *program;		/* section name, "" for none */
	const char *btf_name;		/* its attach point in the kernel's BTF */
	enum bpf_attach_type attach_type;
};

static struct read_hook_row
read_hook_row(enum pce_read_hook hook)
{
	switch (hook)
	{
#define PCE_READ_HOOK_ROW(sym, name, program, btf_name, attach_type) \
		case sym: return (struct read_hook_row) {program, btf_name, attach_type};
			PCE_READ_HOOK_TABLE(PCE_READ_HOOK_ROW)
#undef PCE_READ_HOOK_ROW
	}
	return (struct read_hook_row) {"", "", 0};
}

/* The program of a read hook as its section names it, "" for none. */
const char *
pce_read_hook_attach_point(enum pce_read_hook hook)
{
	return read_hook_row(hook).program;
}

/*
 * Does the running kernel's BTF describe name as an attach point of type
 * attach_type?  (Each lookup parses the kernel's BTF again.)
 */
static bool
kernel_has_attach_point(const char *name, enum bpf_attach_type attach_type)
{
	return libbpf_find_vmlinux_btf_id(name, attach_type) > 0;
}

/* Does the running kernel describe hook's attach point (its BTF)? */
bool
pce_kernel_has_read_hook(enum pce_read_hook hook)
{
	struct read_hook_row row = read_hook_row(hook);

	return row.btf_name[0] == '\0' || kernel_has_attach_point(row.btf_name, row.attach_type);
}

/*
 * libbpf's printer while a read hook that may be refused is loaded and
 * attached: its warnings (and a misleading hint about ulimit -l) are
 * dropped, the loader's own line says what was refused and why; with -v
 * (pce_tracker_set_verbose) everything still shows.
 */
static libbpf_print_fn_t loud_libbpf_print;
static bool libbpf_verbose;

static int
quiet_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!libbpf_verbose || !loud_libbpf_print)
		return 0;
	return loud_libbpf_print(level, fmt, ap);
}

void
pce_tracker_set_verbose(bool verbose)
{
	libbpf_verbose = verbose;
}

/*
 * What every attempt to load the tracker shares: where it pins, the
 * cluster's account, and which optional tracepoints the kernel's BTF has
 * (looked up once, not for each read hook tried).
 */
struct tracker_setup
{
	const struct pce_pins *pins;
	uid_t		cluster_uid;
	bool		has_fork;		/* sched_process_fork: marks handed down */
	bool		has_dirty;		/* writeback_dirty_folio: write-back for scans */
};

/* The tracker opened, its constants set for this cluster and kernel. */
static struct tracker_bpf *
open_tracker(const struct tracker_setup *ts, enum pce_read_hook hook)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = ts->pins->via_fd);
	struct tracker_bpf *skel;

	skel = tracker_bpf__open_opts(&oo);
	if (!skel)
		pce_fail("cannot open the tracker BPF object: %s", strerror(errno));
	skel->rodata->cluster_uid = ts->cluster_uid;	/* I/O workers' and scan files' owner (maps.bpf.h) */
	skel->rodata->promote_by_read = hook != PCE_READ_HOOK_NONE;
	skel->rodata->page_shift = __builtin_ctzl((unsigned long) sysconf(_SC_PAGESIZE));
	return skel;
}

/* Load an opened tracker: skel, or NULL with errno when the kernel refuses it. */
static struct tracker_bpf *
load_opened_tracker(struct tracker_bpf *skel)
{
	int			err = tracker_bpf__load(skel);

	if (err == 0)
		return skel;
	tracker_bpf__destroy(skel);
	errno = -err;
	return NULL;
}

/*
 * Open the tracker with hook as its read program (the other is not
 * loaded; with none, the activation tracepoint promotes where the kernel
 * has it) and load it.  NULL, with errno, when the kernel refuses it.
 */
static struct tracker_bpf *
load_tracker(const struct tracker_setup *ts, enum pce_read_hook hook)
{
	struct tracker_bpf *skel = open_tracker(ts, hook);

	bpf_program__set_autoload(skel->progs.on_file_read, hook == PCE_READ_HOOK_TRACEPOINT);
	bpf_program__set_autoload(skel->progs.on_filemap_read, hook == PCE_READ_HOOK_FENTRY);
	/* without a read hook (tried once, last), activations promote */
	bpf_program__set_autoload(skel->progs.on_folio_activated, hook == PCE_READ_HOOK_NONE &&
							  kernel_has_attach_point("mm_lru_activate", BPF_TRACE_RAW_TP));
	bpf_program__set_autoload(skel->progs.on_process_fork, ts->has_fork);
	bpf_program__set_autoload(skel->progs.on_folio_dirtied, ts->has_dirty);
	return load_opened_tracker(skel);
}

/*
 * Load the tracker with read hook hook (not none) and attach the hook's
 * program: the skeleton, with *promote_link, or NULL when the kernel lacks
 * or refuses it (the loader says so: fentry is refused on some kernels).
 */
static struct tracker_bpf *
try_read_hook(const struct tracker_setup *ts, enum pce_read_hook hook, struct bpf_link **promote_link)
{
	const char *point = pce_read_hook_attach_point(hook);
	struct tracker_bpf *skel;

	if (!pce_kernel_has_read_hook(hook))
	{
		pce_info("the kernel has no %s: trying the next read hook", point);
		return NULL;
	}
	loud_libbpf_print = libbpf_set_print(quiet_libbpf_print);
	skel = load_tracker(ts, hook);
	*promote_link = skel ? bpf_program__attach(read_hook_bpf_program(skel, hook)) : NULL;
	libbpf_set_print(loud_libbpf_print);
	if (*promote_link)
		return skel;
	pce_info("%s %s (%s): trying the next read hook",
			 skel ? "cannot attach" : "the tracker did not load with", point, strerror(errno));
	if (skel)
		tracker_bpf__destroy(skel);
	return NULL;
}

/* The tracker without a read hook; its refusal ends the run. */
static struct tracker_bpf *
load_tracker_without_read_hook(const struct tracker_setup *ts)
{
	struct tracker_bpf *skel = load_tracker(ts, PCE_READ_HOOK_NONE);

	if (!skel)
		pce_fail("the kernel refused the tracker program (%s); run with -v for the verifier log",
				 strerror(errno));
	return skel;
}

/* No read hook: the activation tracepoint promotes, where the kernel has it. */
static struct tracker_bpf *
load_without_read_hook(const struct tracker_setup *ts, struct bpf_link **promote_link,
					   char *promotion_missing, size_t missinglen)
{
	struct tracker_bpf *skel = load_tracker_without_read_hook(ts);

	*promote_link = NULL;
	if (!bpf_program__autoload(skel->progs.on_folio_activated))
		snprintf(promotion_missing, missinglen,
				 "no read hook is attached and the kernel has no mm_lru_activate tracepoint");
	else if (!(*promote_link = bpf_program__attach(skel->progs.on_folio_activated)))
		snprintf(promotion_missing, missinglen,
				 "cannot attach tp_btf/mm_lru_activate: %s", strerror(errno));
	return skel;
}

/*
 * Load the tracker with the first read hook, from *hook on, that the
 * kernel has, loads and attaches (PCE_READ_HOOK_TABLE's order), else with
 * none.  *hook becomes the one in place; *promote_link the promotion
 * program's link, or NULL with why in promotion_missing.  A refusal of the
 * tracker itself ends the run.
 */
static struct tracker_bpf *
load_tracker_with_read_hook(const struct tracker_setup *ts, enum pce_read_hook *hook,
							struct bpf_link **promote_link, char *promotion_missing, size_t missinglen)
{
	for (; *hook != PCE_READ_HOOK_NONE; (*hook)++)
	{
		struct tracker_bpf *skel = try_read_hook(ts, *hook, promote_link);

		if (skel)
			return skel;
	}
	return load_without_read_hook(ts, promote_link, promotion_missing, missinglen);
}

/*
 * Load the tracker (stock-kernel mechanism), reusing pinned maps, attach
 * its programs and pin the links.  The read hook (the readers' positions
 * and promotion on reads, load_tracker_with_read_hook) is the first that
 * works from *read_hook on, and *read_hook says which; promotion is
 * optional: on a kernel that offers no way to see it, the tracker runs
 * without it and the loader says so.  Its link is pinned as
 * tracker_activate_link whichever program it is.  cluster_uid: the
 * cluster's account, the only one whose tasks the I/O-worker rule
 * considers and whose files are a scan's (0, test tools only: no I/O
 * workers, files of every owner).
 */
struct tracker_bpf *
pce_install_tracker(const struct pce_pins *pins, uid_t cluster_uid, enum pce_read_hook *read_hook,
					char *promotion_missing, size_t missinglen)
{
	struct tracker_setup ts = {
		.pins = pins,
		.cluster_uid = cluster_uid,
		.has_fork = kernel_has_attach_point("sched_process_fork", BPF_TRACE_RAW_TP),
		.has_dirty = kernel_has_attach_point("writeback_dirty_folio", BPF_TRACE_RAW_TP),
	};
	struct tracker_bpf *skel;
	struct bpf_link *add_link;
	struct bpf_link *remove_link;
	struct bpf_link *promote_link = NULL;

	promotion_missing[0] = '\0';
	check_pinned_layout(pins);
	skel = load_tracker_with_read_hook(&ts, read_hook, &promote_link, promotion_missing, missinglen);
	add_link = bpf_program__attach(skel->progs.on_page_cache_add);
	if (!add_link)
		pce_fail("cannot attach tp_btf/mm_filemap_add_to_page_cache: %s", strerror(errno));
	remove_link = bpf_program__attach(skel->progs.on_page_cache_delete);
	if (!remove_link)
		pce_fail("cannot attach tp_btf/mm_filemap_delete_from_page_cache: %s", strerror(errno));
	if (promotion_missing[0])
		pce_info("scan pages will not be promoted: %s", promotion_missing);
	pin_link_replacing(pins, add_link, PCE_PIN_TRACKER_LINK);
	pin_link_replacing(pins, remove_link, PCE_PIN_TRACKER_REMOVE_LINK);
	if (promote_link)
		pin_link_replacing(pins, promote_link, PCE_PIN_TRACKER_ACTIVATE_LINK);
	else
		unpin(pins, PCE_PIN_TRACKER_ACTIVATE_LINK);
	install_fork_link(pins, skel, bpf_program__autoload(skel->progs.on_process_fork));
	install_writeback_link(pins, skel, bpf_program__autoload(skel->progs.on_folio_dirtied));
	init_knobs(skel->maps.knobs);
	return skel;
}

/*
 * Load the tracker for its maps alone, in cache_ext mode: the policy does
 * the tracking, so only the fork program (marks handed down, which the
 * policy reads too) is loaded and attached; the tracking programs are not
 * loaded at all (a refused policy's fallback, pce_install_tracker, loads
 * them with the read hook it finds).  Attaching the tracking programs only to
 * detach them once the policy is in place patched the page cache's
 * tracepoints on and off for nothing, and the cache_ext kernel under QEMU
 * once died of an int3 left in delete_from_page_cache_batch by that
 * patching (t/090, lane 15).  pce_install_tracker attaches them if the
 * policy is refused.
 */
struct tracker_bpf *
pce_load_tracker_maps(const struct pce_pins *pins, uid_t cluster_uid)
{
	struct tracker_setup ts = {
		.pins = pins,
		.cluster_uid = cluster_uid,
		.has_fork = kernel_has_attach_point("sched_process_fork", BPF_TRACE_RAW_TP),
	};
	struct tracker_bpf *skel;
	struct bpf_program *prog;

	check_pinned_layout(pins);
	skel = open_tracker(&ts, PCE_READ_HOOK_NONE);
	bpf_object__for_each_program(prog, skel->obj)
		bpf_program__set_autoload(prog, prog == skel->progs.on_process_fork && ts.has_fork);
	skel = load_opened_tracker(skel);
	if (!skel)
		pce_fail("the kernel refused the tracker's maps (%s); run with -v for the log",
				 strerror(errno));
	install_fork_link(pins, skel, ts.has_fork);
	init_knobs(skel->maps.knobs);
	return skel;
}

/*
 * In cache_ext mode the policy does the tracker's work: stop the tracker
 * (but for the fork program, which the policy needs as well).
 */
void
pce_unpin_tracker_links(const struct pce_pins *pins)
{
	unpin(pins, PCE_PIN_TRACKER_LINK);
	unpin(pins, PCE_PIN_TRACKER_REMOVE_LINK);
	unpin(pins, PCE_PIN_TRACKER_ACTIVATE_LINK);
	unpin(pins, PCE_PIN_TRACKER_WRITEBACK_LINK);
}

/* The map the loader records what it did in (loader_info, shared by all). */
struct bpf_map *
pce_tracker_loader_info(struct tracker_bpf *tracker)
{
	return tracker->maps.loader_info;
}

void
pce_tracker_destroy(struct tracker_bpf *tracker)
{
	tracker_bpf__destroy(tracker);
}
