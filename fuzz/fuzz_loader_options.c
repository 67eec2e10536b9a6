/*
 * fuzz_loader_options.c
 *		libFuzzer target for the loader's command-line parser: the input is
 *		split at newlines into at most 16 arguments.
 *
 * Invariants: parsing terminates; whatever it accepts has a known mode,
 * absolute bpffs and cgroup paths without "..", and a cluster id that is
 * safe as a path component.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#define MAX_ARGS 16

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *buf = malloc(size + 1);
	char	   *argv[MAX_ARGS + 2];
	int			argc = 0;
	char		err[256];
	struct pce_loader_options opt;
	char	   *p;

	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[argc++] = "pg_cache_ext_loader";
	p = buf;
	while (argc <= MAX_ARGS)
	{
		char	   *nl = strchr(p, '\n');

		argv[argc++] = p;
		if (!nl)
			break;
		*nl = '\0';
		p = nl + 1;
	}
	argv[argc] = NULL;

	if (pce_parse_loader_options(argc, argv, &opt, err, sizeof(err)) == 0 && !opt.help)
	{
		if (!pce_valid_mode(opt.mode))
			abort();
		if (opt.config_file && (opt.config_file[0] != '/' || strstr(opt.config_file, "/../")))
			abort();
		if (opt.bpffs_dir[0] != '/' || strstr(opt.bpffs_dir, "/../"))
			abort();
		if (opt.cgroup && opt.cgroup[0] != '/')
			abort();
		if (opt.cluster_id && (!pce_valid_cluster_id(opt.cluster_id) || strchr(opt.cluster_id, '/')))
			abort();
		if (!opt.datadir && !opt.cluster_id)
			abort();
	}
	else if (strnlen(err, sizeof(err)) == sizeof(err))
		abort();
	free(buf);
	return 0;
}
