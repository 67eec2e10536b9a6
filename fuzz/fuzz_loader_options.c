/*
 * fuzz_loader_options.c
 *		libFuzzer target for the loader's command-line parser: the input is
 *		split at newlines into at most 16 arguments.
 *
 * Invariants: parsing terminates; whatever it accepts has a known mode,
 * paths in normal form (absolute, no "//", "." or ".." component, no
 * trailing slash: the rule of bpf/pce_paths.h), and a cluster id that is
 * safe as a path component.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#define MAX_ARGS 16

/* The path rule restated independently: absolute, no "//", ".", ".." or trailing "/". */
static int
normal_abs_path(const char *p)
{
	size_t		len = strlen(p);
	char		padded[8192];

	if (p[0] != '/' || len < 2 || len >= 4000 || p[len - 1] == '/')
		return 0;
	snprintf(padded, sizeof(padded), "%s/", p);
	return !strstr(padded, "//") && !strstr(padded, "/./") && !strstr(padded, "/../");
}

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
		if (opt.config_file && !normal_abs_path(opt.config_file))
			abort();
		if (!normal_abs_path(opt.bpffs_dir))
			abort();
		if (opt.cgroup && !normal_abs_path(opt.cgroup))
			abort();
		if (opt.cluster_id && (!pce_valid_cluster_id(opt.cluster_id) || strchr(opt.cluster_id, '/')))
			abort();
		if (opt.debian_cluster && (!pce_valid_debian_cluster(opt.debian_cluster) ||
								   strchr(opt.debian_cluster, '/') || opt.datadir || opt.cluster_id))
			abort();
		if (!opt.datadir && !opt.cluster_id && !opt.debian_cluster)
			abort();
	}
	else if (strnlen(err, sizeof(err)) == sizeof(err))
		abort();
	free(buf);
	return 0;
}
