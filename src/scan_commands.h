/*
 * scan_commands.h
 *		The parser of pg_cache_ext.scan_commands (scan_commands.c).
 */
#ifndef PCE_SCAN_COMMANDS_H
#define PCE_SCAN_COMMANDS_H

#include <stddef.h>

/* the commands, their words and bits: PCE_REASON_TABLE in bpf/pg_cache_ext.h */
#include <linux/types.h>
#include "pg_cache_ext.h"

/*
 * Parse a comma-separated list of command names into a bit mask.  Returns
 * -1 on error; then bad holds the unknown word, or is empty for a syntax
 * error.  Never allocates, never throws.
 */
extern int	pce_parse_scan_commands(const char *value, char *bad, size_t badlen);

/* "vacuum, analyze, ..., copy_to": every command word, for messages */
extern const char *pce_scan_command_words(void);

#endif
