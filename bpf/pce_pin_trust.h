/*
 * pce_pin_trust.h
 *		The one rule for which pins an unprivileged user of them trusts: the
 *		server (src/bpf_maps.c) and pg_cache_ext_run apply it alike, so that
 *		a pin one of them refuses the other refuses too.
 *
 * A pin is trusted when root made it for the server's group: a regular
 * file owned by root (in a user namespace that does not map the host's
 * root, by an owner outside it: pce_root_uid_here()), giving other users
 * nothing, and giving group access
 * only to that group (a pin that gives its group nothing may have any
 * group: the loader pins links root:root 0600 before renaming them into
 * place).  The pin directory must be root's directory that neither other
 * users nor another group can write into, so that nobody but root can swap
 * a pin.  User space only (not BPF code).
 */
#ifndef PCE_PIN_TRUST_H
#define PCE_PIN_TRUST_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

/*
 * The uid root's files have as this process sees them: 0, or, in a user
 * namespace (a container's, with its ids remapped), what root is mapped
 * to, or else the kernel's overflow uid, which every owner outside the
 * namespace shows as.  No process inside it, the server's account
 * included, can own a file as such an owner.  Read once.
 */
static inline uid_t
pce_root_uid_here(void)
{
	static long root_uid = -1;
	FILE	   *f;
	long		inside,
				outside,
				count;
	bool		mapped = false;

	if (root_uid >= 0)
		return (uid_t) root_uid;
	root_uid = 0;				/* no uid_map: a kernel without user namespaces */
	if ((f = fopen("/proc/self/uid_map", "r")) == NULL)
		return 0;
	while (fscanf(f, "%ld %ld %ld", &inside, &outside, &count) == 3)
		if (outside == 0 && count > 0)
		{
			root_uid = inside;
			mapped = true;
		}
	fclose(f);
	if (mapped)
		return (uid_t) root_uid;
	root_uid = 65534;			/* the kernel's default overflowuid */
	if ((f = fopen("/proc/sys/kernel/overflowuid", "r")) != NULL)
	{
		if (fscanf(f, "%ld", &count) == 1 && count >= 0)
			root_uid = count;
		fclose(f);
	}
	return (uid_t) root_uid;
}

/* May a member of group use the pin st describes? */
static inline bool
pce_pin_trusted(const struct stat *st, gid_t group)
{
	return S_ISREG(st->st_mode) && (st->st_mode & S_IRWXO) == 0 && st->st_uid == pce_root_uid_here() &&
		((st->st_mode & S_IRWXG) == 0 || st->st_gid == group);
}

/* May a member of group use the pins in the directory st describes? */
static inline bool
pce_pin_dir_trusted(const struct stat *st, gid_t group)
{
	return S_ISDIR(st->st_mode) && st->st_uid == pce_root_uid_here() && !(st->st_mode & S_IWOTH) &&
		(!(st->st_mode & S_IWGRP) || st->st_gid == group);
}

#endif							/* PCE_PIN_TRUST_H */
