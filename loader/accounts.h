/*
 * accounts.h
 *		--user and --group as the kernel sees them (accounts.c): a name, or,
 *		where no account or group has that name, a decimal id (known to the
 *		host or not), as chown(1) takes them.
 */
#ifndef PCE_LOADER_ACCOUNTS_H
#define PCE_LOADER_ACCOUNTS_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * The user named (or numbered) by arg: its uid, and its primary group, or
 * fallback_gid for an id the host has no account for.  false if neither.
 */
extern bool pce_lookup_user(const char *arg, gid_t fallback_gid, uid_t *uid, gid_t *gid);

/* The group named (or numbered) by arg; false if neither. */
extern bool pce_lookup_group(const char *arg, gid_t *gid);

#endif
