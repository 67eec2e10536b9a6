/*
 * fuzz_scan_commands.c
 *		libFuzzer target for the pg_cache_ext.scan_commands parser.
 *
 * Invariants checked on every input: the parser terminates, never reads
 * past the string, returns -1 or a mask within PCE_CMD_ALL, and on error
 * leaves a NUL-terminated word no longer than the buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scan_commands.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *value = malloc(size + 1);
	char		bad[16];
	int			mask;

	memcpy(value, data, size);
	value[size] = '\0';
	mask = pce_parse_scan_commands(value, bad, sizeof(bad));
	if (mask < -1 || (mask > 0 && (mask & ~PCE_CMD_ALL) != 0))
		abort();
	if (mask == -1 && strnlen(bad, sizeof(bad)) >= sizeof(bad))
		abort();
	/* a valid list stays valid with blanks around it */
	if (mask >= 0 && size < 4096)
	{
		char	   *padded = malloc(size + 3);

		padded[0] = ' ';
		memcpy(padded + 1, value, size + 1);
		strcat(padded, " ");
		if (strlen(value) == size && pce_parse_scan_commands(padded, NULL, 0) != mask)
			abort();
		free(padded);
	}
	free(value);
	return 0;
}
