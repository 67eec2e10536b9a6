/*
 * policy.h
 *		The loader's cache_ext part: detect, attach and detach the struct_ops
 *		policy (bpf/policy.bpf.c) on a cgroup v2 directory.
 */
#ifndef PCE_LOADER_POLICY_H
#define PCE_LOADER_POLICY_H

#include <stdbool.h>
#include <stddef.h>

/* true when the running kernel's BTF has struct cache_ext_ops */
extern bool pce_kernel_has_cache_ext(char *why, size_t whylen);

/* load the policy reusing the maps pinned in pin_dir, attach it to cgroup_path, pin the link */
extern int	pce_attach_policy(const char *pin_dir, const char *cgroup_path, char *why, size_t whylen);

/* unpin the policy link (detaching it) and report what is lost */
extern int	pce_detach_policy(const char *pin_dir, char *why, size_t whylen);

#endif
