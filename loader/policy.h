/*
 * policy.h
 *		The loader's cache_ext part: detect, attach and detach the struct_ops
 *		policy (bpf/policy.bpf.c) on a cgroup v2 directory.
 */
#ifndef PCE_LOADER_POLICY_H
#define PCE_LOADER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct pce_pins;

/* true when the running kernel's BTF has struct cache_ext_ops */
extern bool pce_kernel_btf_has_cache_ext_ops(char *why, size_t whylen);

/*
 * Open a cgroup v2 directory once, following no symlink; name gets what the
 * kernel calls the opened directory.  The fd, or a negative errno with why.
 */
extern int	pce_open_cgroup(const char *cgroup_path, char *name, size_t namelen, char *why, size_t whylen);

/* does the cache_ext kernel run policies on a cgroup of this name? */
extern bool pce_cgroup_name_enables_cache_ext(const char *cgroup_path);

/*
 * Load the policy reusing the maps pinned in pins, attach it to the cgroup
 * cgroup_fd (shown as cgroup_name), pin the link with the pins' group.
 * cluster_uid as for pce_install_tracker (tracker.h).
 */
extern int	pce_attach_policy(const struct pce_pins *pins, int cgroup_fd, const char *cgroup_name,
							  uid_t cluster_uid, char *why, size_t whylen);

/*
 * Is the pinned policy link attached to the cgroup cgroup_fd is open on?
 * By the link's own cgroup id (the kernel's word), not by loader_info, which
 * the server's group may write.
 */
extern bool pce_policy_serves_cgroup(const struct pce_pins *pins, int cgroup_fd);

/*
 * Detach the pinned policy from its cgroup: drain its lists, lift the
 * cgroup's limits for the kernel's teardown (recorded in the policy_state
 * pin), unpin link and map, restore the limits once the kernel has freed
 * the map (never before: the limits then stay lifted, recorded, and the
 * call fails with why).
 */
extern int	pce_detach_policy(const struct pce_pins *pins, char *why, size_t whylen);

/*
 * Finish what a detach that did not get to its end left: the kernel's
 * teardown, then the cgroup's limits; or the policy's phase.  0, or a
 * negative errno with why: the limits stay lifted with their record, and
 * nothing may attach or detach until a later run succeeds.
 */
extern int	pce_policy_resume_interrupted(const struct pce_pins *pins, char *why, size_t whylen);

#endif
