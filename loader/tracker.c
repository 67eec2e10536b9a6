/*
 * tracker.c
 *		The loader's stock-kernel part, beside policy.c: load the tracker
 *		(bpf/tracker.bpf.c) reusing the cluster's pinned maps, attach its
 *		tracepoints, pin the links root's alone (0600), give the knobs their
 *		defaults; and unpin its links when the cache_ext policy takes over.
 *
 * The tracker is loaded in every mode, so that the shared maps exist with
 * their final layout; in cache_ext mode its links are removed again once
 * the policy is attached.  Failures end the run (pce_fail, report.c).
 */
#include <errno.h>
#include <limits.h>
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

/*
 * Which promotion program this kernel takes: the read tracepoint
 * (mm_filemap_get_pages, Linux 6.10+, which sees the reading task), else
 * the activation tracepoint (whose task is whoever drained the per-CPU
 * batch); NULL, with the reason, when neither exists.  The other program
 * is not loaded.
 */
static struct bpf_program *
choose_promotion(struct tracker_bpf *skel, const char **tracepoint,
				 char *promotion_missing, size_t missinglen)
{
	bool		by_read = libbpf_find_vmlinux_btf_id("mm_filemap_get_pages", BPF_TRACE_RAW_TP) > 0;
	bool		by_activation = libbpf_find_vmlinux_btf_id("mm_lru_activate", BPF_TRACE_RAW_TP) > 0;

	skel->rodata->promote_by_read = by_read;
	bpf_program__set_autoload(skel->progs.on_file_read, by_read);
	bpf_program__set_autoload(skel->progs.on_folio_activated, !by_read && by_activation);
	*tracepoint = by_read ? "mm_filemap_get_pages" : "mm_lru_activate";
	if (by_read)
		return skel->progs.on_file_read;
	if (by_activation)
		return skel->progs.on_folio_activated;
	snprintf(promotion_missing, missinglen,
			 "the kernel has neither the mm_filemap_get_pages nor the mm_lru_activate tracepoint");
	return NULL;
}

/*
 * Load the tracker (stock-kernel mechanism), reusing pinned maps, attach
 * its tracepoints and pin the links.  Promotion (see choose_promotion) is
 * optional: on a kernel that lacks both tracepoints, or refuses the
 * attachment, the tracker runs without it and the loader says so.  Its
 * link is pinned as tracker_activate_link whichever program it is.
 * cluster_uid: the cluster's account, the only one whose tasks the
 * I/O-worker rule considers and whose files are a scan's (0, test tools
 * only: no I/O workers, files of every owner).
 */
struct tracker_bpf *
pce_install_tracker(const struct pce_pins *pins, uid_t cluster_uid, char *promotion_missing, size_t missinglen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = pins->via_fd);
	struct tracker_bpf *skel;
	struct bpf_link *add_link;
	struct bpf_link *remove_link;
	struct bpf_link *promote_link = NULL;
	struct bpf_program *promote_prog;
	const char *promote_tp;
	bool		can_fork;
	bool		can_dirty;
	int			err;

	promotion_missing[0] = '\0';
	check_pinned_layout(pins);
	skel = tracker_bpf__open_opts(&oo);
	if (!skel)
		pce_fail("cannot open the tracker BPF object: %s", strerror(errno));
	skel->rodata->cluster_uid = cluster_uid;	/* I/O workers' and scan files' owner (maps.bpf.h) */
	promote_prog = choose_promotion(skel, &promote_tp, promotion_missing, missinglen);
	can_fork = libbpf_find_vmlinux_btf_id("sched_process_fork", BPF_TRACE_RAW_TP) > 0;
	if (!can_fork)
		bpf_program__set_autoload(skel->progs.on_process_fork, false);
	can_dirty = libbpf_find_vmlinux_btf_id("writeback_dirty_folio", BPF_TRACE_RAW_TP) > 0;
	bpf_program__set_autoload(skel->progs.on_folio_dirtied, can_dirty);
	err = tracker_bpf__load(skel);
	if (err)
		pce_fail("the kernel refused the tracker program (%s); run with -v for the verifier log",
			 strerror(-err));
	add_link = bpf_program__attach(skel->progs.on_page_cache_add);
	if (!add_link)
		pce_fail("cannot attach tp_btf/mm_filemap_add_to_page_cache: %s", strerror(errno));
	remove_link = bpf_program__attach(skel->progs.on_page_cache_delete);
	if (!remove_link)
		pce_fail("cannot attach tp_btf/mm_filemap_delete_from_page_cache: %s", strerror(errno));
	if (promote_prog)
	{
		promote_link = bpf_program__attach(promote_prog);
		if (!promote_link)
			snprintf(promotion_missing, missinglen,
					 "cannot attach tp_btf/%s: %s", promote_tp, strerror(errno));
	}
	if (promotion_missing[0])
		pce_info("scan pages will not be promoted: %s", promotion_missing);
	pin_link_replacing(pins, add_link, PCE_PIN_TRACKER_LINK);
	pin_link_replacing(pins, remove_link, PCE_PIN_TRACKER_REMOVE_LINK);
	if (promote_link)
		pin_link_replacing(pins, promote_link, PCE_PIN_TRACKER_ACTIVATE_LINK);
	else
		unpin(pins, PCE_PIN_TRACKER_ACTIVATE_LINK);
	install_fork_link(pins, skel, can_fork);
	install_writeback_link(pins, skel, can_dirty);
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
