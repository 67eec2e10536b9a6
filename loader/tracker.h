/*
 * tracker.h
 *		The loader's stock-kernel part (tracker.c): install the tracker, or
 *		unpin its links.
 */
#ifndef PCE_LOADER_TRACKER_H
#define PCE_LOADER_TRACKER_H

#include <stddef.h>
#include <sys/types.h>

struct bpf_map;
struct pce_pins;
struct tracker_bpf;

/*
 * Load and attach the tracker reusing the maps pinned in pins, pin its
 * links, give the knobs their defaults the first time.  promotion_missing
 * gets why scan folios cannot be promoted, or "".  cluster_uid: the
 * cluster's account, whose tasks alone may be taken for I/O workers and
 * whose files alone are a scan's (0, test tools only: no task is, every
 * file may be).  Ends the run on failure.
 */
extern struct tracker_bpf *pce_install_tracker(const struct pce_pins *pins, uid_t cluster_uid,
											   char *promotion_missing, size_t missinglen);

/* In cache_ext mode the policy does the tracker's work: stop the tracker. */
extern void pce_unpin_tracker_links(const struct pce_pins *pins);

extern struct bpf_map *pce_tracker_loader_info(struct tracker_bpf *tracker);
extern void pce_tracker_destroy(struct tracker_bpf *tracker);

#endif
