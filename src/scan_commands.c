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
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "scan_commands.h"

/* every reason's word; only the commands' (bits != 0) and all/none match */
#define COMMAND_WORD(sym, name, is_command) \
	{name, (is_command) ? PCE_CMD_BIT(PCE_REASON_##sym) : 0},
static const struct
{
	const char *name;
	int			bits;
}			command_words[] = {
	PCE_REASON_TABLE(COMMAND_WORD)
	{"all", PCE_CMD_ALL},
	{"none", 0},
};
#undef COMMAND_WORD

static int
word_bits(const char *word, size_t len)
{
	for (size_t i = 0; i < sizeof(command_words) / sizeof(command_words[0]); i++)
	{
		const char *name = command_words[i].name;
		bool		word_of_reason = i < PCE_REASON__COUNT;

		if (word_of_reason && command_words[i].bits == 0)
			continue;
		if (strlen(name) == len && strncasecmp(name, word, len) == 0)
			return command_words[i].bits;
	}
	return -1;
}

const char *
pce_scan_command_words(void)
{
	static char words[256];

	if (words[0] == '\0')
	{
		for (int i = 0; i < PCE_REASON__COUNT; i++)
		{
			if (command_words[i].bits == 0)
				continue;
			if (words[0])
				strncat(words, ", ", sizeof(words) - strlen(words) - 1);
			strncat(words, command_words[i].name, sizeof(words) - strlen(words) - 1);
		}
	}
	return words;
}

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
		int			bits;

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

		bits = word_bits(start, len);
		if (bits < 0)
		{
			if (bad && badlen > 0)
				snprintf(bad, badlen, "%.*s", (int) (len < 64 ? len : 64), start);
			return -1;
		}
		mask |= bits;
		if (*p == '\0')
			return mask;
		p++;					/* skip the comma */
	}
}
