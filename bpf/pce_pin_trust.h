/*
 * pce_pin_trust.h
 *		The one rule for which pins an unprivileged user of them trusts: the
 *		server (src/bpf_maps.c) and pg_cache_ext_run apply it alike, so that
 *		a pin one of them refuses the other refuses too.
 *
 * A pin is trusted when root made it for the server's group: a regular
 * file owned by root, giving other users nothing, and giving group access
 * only to that group (a pin that gives its group nothing may have any
 * group: the loader pins links root:root 0600 before renaming them into
 * place).  The pin directory must be root's directory that neither other
 * users nor another group can write into, so that nobody but root can swap
 * a pin.  User space only (not BPF code).
 */
#ifndef PCE_PIN_TRUST_H
#define PCE_PIN_TRUST_H

#include <stdbool.h>
#include <sys/stat.h>

/* May a member of group use the pin st describes? */
static inline bool
pce_pin_trusted(const struct stat *st, gid_t group)
{
	return S_ISREG(st->st_mode) && (st->st_mode & S_IRWXO) == 0 && st->st_uid == 0 &&
		((st->st_mode & S_IRWXG) == 0 || st->st_gid == group);
}

/* May a member of group use the pins in the directory st describes? */
static inline bool
pce_pin_dir_trusted(const struct stat *st, gid_t group)
{
	return S_ISDIR(st->st_mode) && st->st_uid == 0 && !(st->st_mode & S_IWOTH) &&
		(!(st->st_mode & S_IWGRP) || st->st_gid == group);
}

#endif							/* PCE_PIN_TRUST_H */
