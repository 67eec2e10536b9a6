/*
 * options.c
 *		The loader's command-line parser and validator.
 *
 * Everything here is outside input that ends up in paths below bpffs, so
 * it is checked strictly: the cluster id may hold only [0-9a-z_-], paths
 * must be absolute and bounded, and the mode must be one we know.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "options.h"

bool
pce_valid_cluster_id(const char *id)
{
	size_t		len = strlen(id);

	if (len == 0 || len > PCE_CLUSTER_ID_MAX)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || *p == '_' || *p == '-'))
			return false;
	return true;
}

bool
pce_valid_abs_path(const char *path)
{
	return path[0] == '/' && strlen(path) < PATH_MAX - 64 && strstr(path, "/../") == NULL &&
		strcmp(path + strlen(path) - (strlen(path) >= 3 ? 3 : 0), "/..") != 0;
}

bool
pce_valid_mode(const char *mode)
{
	return strcmp(mode, "auto") == 0 || strcmp(mode, "stock") == 0 ||
		strcmp(mode, "cache_ext") == 0 || strcmp(mode, "off") == 0;
}

int
pce_parse_loader_options(int argc, char **argv, struct pce_loader_options *opt,
						 char *err, size_t errlen)
{
	static const struct option longopts[] = {
		{"pgdata", required_argument, NULL, 'D'},
		{"cluster-id", required_argument, NULL, 'i'},
		{"bpffs-dir", required_argument, NULL, 'b'},
		{"group", required_argument, NULL, 'g'},
		{"mode", required_argument, NULL, 'm'},
		{"cgroup", required_argument, NULL, 'c'},
		{"config-file", required_argument, NULL, 'f'},
		{"check", no_argument, NULL, 'C'},
		{"unload", no_argument, NULL, 'U'},
		{"show", no_argument, NULL, 'S'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	int			c;

	memset(opt, 0, sizeof(*opt));
	opt->bpffs_dir = PCE_DEFAULT_BPFFS_DIR;
	opt->group = "postgres";
	opt->mode = "auto";
	err[0] = '\0';

	optind = 0;					/* full reinitialisation of getopt */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "D:vh", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'D':
				opt->datadir = optarg;
				break;
			case 'i':
				opt->cluster_id = optarg;
				break;
			case 'b':
				opt->bpffs_dir = optarg;
				opt->bpffs_dir_given = true;
				break;
			case 'g':
				opt->group = optarg;
				break;
			case 'm':
				opt->mode = optarg;
				opt->mode_given = true;
				break;
			case 'c':
				opt->cgroup = optarg;
				break;
			case 'f':
				opt->config_file = optarg;
				break;
			case 'C':
				opt->check = true;
				break;
			case 'U':
				opt->unload = true;
				break;
			case 'S':
				opt->show = true;
				break;
			case 'v':
				opt->verbose = true;
				break;
			case 'h':
				opt->help = true;
				return 0;
			default:
				snprintf(err, errlen, "unknown option or missing argument (try --help)");
				return -1;
		}
	}
	if (optind < argc)
	{
		snprintf(err, errlen, "unexpected argument \"%.64s\"", argv[optind]);
		return -1;
	}
	if (!pce_valid_mode(opt->mode))
	{
		snprintf(err, errlen, "invalid --mode \"%.64s\": use auto, stock, cache_ext or off", opt->mode);
		return -1;
	}
	if (!pce_valid_abs_path(opt->bpffs_dir))
	{
		snprintf(err, errlen, "invalid --bpffs-dir \"%.64s\": must be an absolute path without \"..\"",
				 opt->bpffs_dir);
		return -1;
	}
	if (opt->cgroup && !pce_valid_abs_path(opt->cgroup))
	{
		snprintf(err, errlen, "invalid --cgroup \"%.64s\": must be an absolute path without \"..\"",
				 opt->cgroup);
		return -1;
	}
	if (opt->config_file && !pce_valid_abs_path(opt->config_file))
	{
		snprintf(err, errlen, "invalid --config-file \"%.64s\": must be an absolute path without \"..\"",
				 opt->config_file);
		return -1;
	}
	if (opt->cluster_id && !pce_valid_cluster_id(opt->cluster_id))
	{
		snprintf(err, errlen, "invalid --cluster-id \"%.64s\": use 1 to %d of 0-9, a-z, '_' and '-'",
				 opt->cluster_id, PCE_CLUSTER_ID_MAX);
		return -1;
	}
	if (opt->datadir && opt->datadir[0] == '\0')
	{
		snprintf(err, errlen, "empty data directory");
		return -1;
	}
	if (!opt->datadir && !opt->cluster_id)
	{
		snprintf(err, errlen, "no data directory given: use -D DATADIR (or --cluster-id)");
		return -1;
	}
	if ((opt->check + opt->unload + opt->show) > 1)
	{
		snprintf(err, errlen, "--check, --unload and --show exclude each other");
		return -1;
	}
	return 0;
}
