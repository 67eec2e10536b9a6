/*
 * scan_commands.h
 *		Bits of pg_cache_ext.scan_commands and its parser (scan_commands.c).
 */
#ifndef PCE_SCAN_COMMANDS_H
#define PCE_SCAN_COMMANDS_H

#include <stddef.h>

#define PCE_CMD_VACUUM			0x01
#define PCE_CMD_ANALYZE			0x02
#define PCE_CMD_CREATE_INDEX	0x04
#define PCE_CMD_REINDEX			0x08
#define PCE_CMD_CLUSTER			0x10
#define PCE_CMD_REFRESH_MATVIEW 0x20
#define PCE_CMD_COPY_TO			0x40
#define PCE_CMD_ALL				0x7f

/*
 * Parse a comma-separated list of command names into a bit mask.  Returns
 * -1 on error; then bad holds the unknown word, or is empty for a syntax
 * error.  Never allocates, never throws.
 */
extern int	pce_parse_scan_commands(const char *value, char *bad, size_t badlen);

#endif
