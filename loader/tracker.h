/*
 * tracker.h
 *		The loader's stock-kernel part (tracker.c): install the tracker, or
 *		unpin its links.
 */
#ifndef PCE_LOADER_TRACKER_H
#define PCE_LOADER_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

#include "pg_cache_ext.h"		/* enum pce_read_hook */

struct bpf_map;
struct pce_pins;
struct tracker_bpf;

/*
 * Load and attach the tracker reusing the maps pinned in pins, pin its
 * links, give the knobs their defaults the first time.  *read_hook: the
 * first read hook to try; on return, the one in place (or none).
 * promotion_missing gets why scan folios cannot be promoted, or "".  cluster_uid: the
 * cluster's account, whose tasks alone may be taken for I/O workers and
 * whose files alone are a scan's (0, test tools only: no task is, every
 * file may be).  Ends the run on failure.
 */
extern struct tracker_bpf *pce_install_tracker(const struct pce_pins *pins, uid_t cluster_uid,
											   enum pce_read_hook *read_hook,
											   char *promotion_missing, size_t missinglen);

/*
 * Load the tracker for its maps (the knobs' defaults, the fork link) and
 * attach nothing else: cache_ext mode, where the policy tracks.
 */
extern struct tracker_bpf *pce_load_tracker_maps(const struct pce_pins *pins, uid_t cluster_uid);

/* Let libbpf's warnings through while a read hook is tried (-v). */
extern void pce_tracker_set_verbose(bool verbose);

/* The program of a read hook (PCE_READ_HOOK_TABLE), "" for none. */
extern const char *pce_read_hook_attach_point(enum pce_read_hook hook);

/* Does the running kernel's BTF describe hook's attach point? */
extern bool pce_kernel_has_read_hook(enum pce_read_hook hook);

/* In cache_ext mode the policy does the tracker's work: stop the tracker. */
extern void pce_unpin_tracker_links(const struct pce_pins *pins);

extern struct bpf_map *pce_tracker_loader_info(struct tracker_bpf *tracker);
extern void pce_tracker_destroy(struct tracker_bpf *tracker);

#endif
