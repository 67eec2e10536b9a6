/*
 * fuzz_loader_config.c
 *		libFuzzer target for the loader's reader of postgresql.conf: the input
 *		is the text of a configuration file.
 *
 * Invariants: parsing terminates without reading past the input (ASan);
 * every value it keeps is NUL-terminated within its buffer and carries the
 * line it came from; an error names the source and a line; the
 * shared_preload_libraries list it read is parsed without reading past it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact-size copy, so that ASan sees any read past the end */
	char	   *text = malloc(size ? size : 1);
	struct pce_loader_config conf;
	char		err[256];

	memcpy(text, data, size);
	memset(&conf, 0, sizeof(conf));
	if (pce_parse_config_text(text, size, "fuzz.conf", &conf, NULL, NULL, err, sizeof(err)) == 0)
	{
		for (int i = 0; i < PCE_CONF__COUNT; i++)
		{
			if (strnlen(conf.value[i], PCE_CONF_VALUE_MAX) == PCE_CONF_VALUE_MAX)
				abort();
			if (conf.value[i][0] && strncmp(conf.where[i], "fuzz.conf line ", 15) != 0)
				abort();
		}
		(void) pce_conf_preloads(conf.value[PCE_CONF_PRELOAD], "pg_cache_ext");
	}
	else if (strncmp(err, "fuzz.conf line ", 15) != 0)
		abort();
	free(text);
	return 0;
}
