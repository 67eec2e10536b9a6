/*
 * accounts.c
 *		Resolving the loader's --user and --group.
 *
 * A name is looked up in the host's account database.  A server in a
 * container runs as ids the host may have no names for (the postgres image
 * of Docker Hub runs as 999), so an argument that no account is named and
 * that is a decimal id is taken as that id: the kernel checks ids, not
 * names.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>

#include "accounts.h"

/* arg as a decimal id below (id_t) -1, which means "no change" to chown(2) */
static bool
parse_id(const char *arg, unsigned long *id)
{
	char	   *end;

	if (arg[0] < '0' || arg[0] > '9')
		return false;
	errno = 0;
	*id = strtoul(arg, &end, 10);
	return errno == 0 && *end == '\0' && *id < (unsigned long) (id_t) -1;
}

/*
 * arg as an account name, else as a decimal uid: its primary group, or
 * fallback_gid for a uid the host has no account for.
 */
bool
pce_lookup_user(const char *arg, gid_t fallback_gid, uid_t *uid, gid_t *gid)
{
	struct passwd *pw = getpwnam(arg);
	unsigned long id;

	if (!pw)
	{
		if (!parse_id(arg, &id))
			return false;
		pw = getpwuid((uid_t) id);
	}
	*uid = pw ? pw->pw_uid : (uid_t) id;
	*gid = pw ? pw->pw_gid : fallback_gid;
	return true;
}

/* arg as a group name, else as a decimal gid */
bool
pce_lookup_group(const char *arg, gid_t *gid)
{
	struct group *gr = getgrnam(arg);
	unsigned long id;

	if (gr)
	{
		*gid = gr->gr_gid;
		return true;
	}
	if (!parse_id(arg, &id))
		return false;
	*gid = (gid_t) id;
	return true;
}
