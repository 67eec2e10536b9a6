/*-------------------------------------------------------------------------
 *
 * scan_commands.c
 *		Parser of pg_cache_ext.scan_commands, the list of utility commands
 *		that mark a backend as scanning.
 *
 * Plain C with no PostgreSQL dependency, so that the fuzzer (fuzz/) can
 * run it outside the server.  The syntax: words separated by commas,
 * surrounding blanks ignored, case-insensitive; an empty string is the
 * empty list; an empty element ("a,,b") is an error.
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "scan_commands.h"

static const struct
{
	const char *name;
	int			bits;
}			command_words[] = {
	{"vacuum", PCE_CMD_VACUUM},
	{"analyze", PCE_CMD_ANALYZE},
	{"create_index", PCE_CMD_CREATE_INDEX},
	{"reindex", PCE_CMD_REINDEX},
	{"cluster", PCE_CMD_CLUSTER},
	{"refresh_matview", PCE_CMD_REFRESH_MATVIEW},
	{"copy_to", PCE_CMD_COPY_TO},
	{"all", PCE_CMD_ALL},
	{"none", 0},
};

int
pce_parse_scan_commands(const char *value, char *bad, size_t badlen)
{
	const char *p = value;
	int			mask = 0;

	if (bad && badlen > 0)
		bad[0] = '\0';
	if (value == NULL)
		return 0;
	while (isspace((unsigned char) *p))
		p++;
	if (*p == '\0')
		return 0;

	for (;;)
	{
		const char *start;
		size_t		len;
		int			found = 0;

		while (isspace((unsigned char) *p))
			p++;
		start = p;
		while (*p && *p != ',')
			p++;
		len = p - start;
		while (len > 0 && isspace((unsigned char) start[len - 1]))
			len--;
		if (len == 0)
			return -1;			/* empty element: syntax error, bad stays "" */

		for (size_t i = 0; i < sizeof(command_words) / sizeof(command_words[0]); i++)
		{
			if (strlen(command_words[i].name) == len &&
				strncasecmp(command_words[i].name, start, len) == 0)
			{
				mask |= command_words[i].bits;
				found = 1;
				break;
			}
		}
		if (!found)
		{
			if (bad && badlen > 0)
				snprintf(bad, badlen, "%.*s", (int) (len < 64 ? len : 64), start);
			return -1;
		}
		if (*p == '\0')
			return mask;
		p++;					/* skip the comma */
	}
}
