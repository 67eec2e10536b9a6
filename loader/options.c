/*
 * options.c
 *		The loader's command-line parser and validator.
 *
 * Everything here is outside input that ends up in paths below bpffs, so
 * it is checked strictly: the cluster id may hold only [0-9a-z_-], paths
 * must follow the shared rule of bpf/pce_paths.h (absolute, normal form,
 * bounded), and the mode must be one we know.
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

/*
 * A Debian cluster as systemd's instance name gives it (postgresql@%i):
 * VERSION-NAME, 1 to 3 digits, '-', then 1 to 63 of A-Z, a-z, 0-9, '_',
 * '.', '-', not starting with '.': it becomes two components of a path.
 */
bool
pce_valid_debian_cluster(const char *instance)
{
	const char *p = instance;
	const char *name;

	while (*p >= '0' && *p <= '9')
		p++;
	if (p == instance || p - instance > 3 || *p != '-')
		return false;
	name = ++p;
	if (*name == '\0' || *name == '.' || strlen(name) > 63)
		return false;
	for (; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  *p == '_' || *p == '.' || *p == '-'))
			return false;
	return true;
}

const char *
pce_path_option_problem(const char *path)
{
	return pce_path_problem(path);
}

bool
pce_valid_mode(const char *mode)
{
	return pce_mode_canonical(mode) != NULL;
}

/*
 * --read-hook: "auto" or a name of PCE_READ_HOOK_TABLE (in any case, as
 * --mode); false, with the reason in err, when it is neither.
 */
static bool
parse_read_hook(const char *name, enum pce_read_hook *hook, char *err, size_t errlen)
{
	static const struct
	{
		const char *name;
		enum pce_read_hook hook;
	}			hooks[] = {
		{"auto", PCE_READ_HOOK_FIRST},
#define PCE_READ_HOOK_NAME(sym, name, program, btf_name, attach_type) {name, sym},
		PCE_READ_HOOK_TABLE(PCE_READ_HOOK_NAME)
#undef PCE_READ_HOOK_NAME
	};

	for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++)
		if (pce_mode_name_equal(name, hooks[i].name))
		{
			*hook = hooks[i].hook;
			return true;
		}
	snprintf(err, errlen, "invalid --read-hook \"%.64s\": use " PCE_READ_HOOK_CHOICES, name);
	return false;
}

/* A path option that breaks the shared rule (bpf/pce_paths.h): say which and why. */
static bool
path_option_refused(const char *option, const char *value, char *err, size_t errlen)
{
	const char *why = pce_path_problem(value);

	if (why)
		snprintf(err, errlen, "invalid %s \"%.64s\": %s (use the plain absolute path)",
				 option, value, why);
	return why != NULL;
}

/* The parsed options, checked together; 0, or -1 with one line in err. */
static int
validate_options(const struct pce_loader_options *opt, char *err, size_t errlen)
{
	if (!pce_valid_mode(opt->mode))
	{
		snprintf(err, errlen, "invalid --mode \"%.64s\": use " PCE_MODE_CHOICES, opt->mode);
		return -1;
	}
	if (path_option_refused("--bpffs-dir", opt->bpffs_dir, err, errlen))
		return -1;
	if (opt->cgroup && path_option_refused("--cgroup", opt->cgroup, err, errlen))
		return -1;
	if (opt->config_file && path_option_refused("--config-file", opt->config_file, err, errlen))
		return -1;
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
	if (opt->debian_cluster && !pce_valid_debian_cluster(opt->debian_cluster))
	{
		snprintf(err, errlen, "invalid --debian-cluster \"%.64s\": use VERSION-NAME, e.g. 15-main "
				 "(systemd's instance name of postgresql@.service)", opt->debian_cluster);
		return -1;
	}
	if (opt->debian_cluster && (opt->datadir || opt->cluster_id))
	{
		snprintf(err, errlen, "--debian-cluster excludes -D and --cluster-id (it finds the data directory)");
		return -1;
	}
	if (!opt->datadir && !opt->cluster_id && !opt->debian_cluster)
	{
		snprintf(err, errlen, "no data directory given: use -D DATADIR (or --debian-cluster, --cluster-id)");
		return -1;
	}
	if ((opt->check + opt->unload + opt->show) > 1)
	{
		snprintf(err, errlen, "--check, --unload and --show exclude each other");
		return -1;
	}
	return 0;
}

/* the loader's long options (getopt_long) */
static const struct option longopts[] = {
	{"pgdata", required_argument, NULL, 'D'},
	{"cluster-id", required_argument, NULL, 'i'},
	{"bpffs-dir", required_argument, NULL, 'b'},
	{"group", required_argument, NULL, 'g'},
	{"user", required_argument, NULL, 'u'},
	{"mode", required_argument, NULL, 'm'},
	{"cgroup", required_argument, NULL, 'c'},
	{"config-file", required_argument, NULL, 'f'},
	{"debian-cluster", required_argument, NULL, 'd'},
	{"read-hook", required_argument, NULL, 'r'},
	{"check", no_argument, NULL, 'C'},
	{"unload", no_argument, NULL, 'U'},
	{"show", no_argument, NULL, 'S'},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0}
};

/* What the loader does without options. */
static void
set_default_options(struct pce_loader_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->bpffs_dir = PCE_DEFAULT_BPFFS_DIR;
	opt->group = "postgres";
	opt->user = "postgres";
	opt->mode = "auto";
	opt->read_hook = PCE_READ_HOOK_FIRST;	/* auto */
}

int
pce_parse_loader_options(int argc, char **argv, struct pce_loader_options *opt,
						 char *err, size_t errlen)
{
	int			c;

	set_default_options(opt);
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
			case 'u':
				opt->user = optarg;
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
			case 'd':
				opt->debian_cluster = optarg;
				break;
			case 'r':
				if (!parse_read_hook(optarg, &opt->read_hook, err, errlen))
					return -1;
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
	/* PostgreSQL matches enum values in any case: so does --mode */
	if (pce_mode_canonical(opt->mode))
		opt->mode = pce_mode_canonical(opt->mode);
	if (optind < argc)
	{
		snprintf(err, errlen, "unexpected argument \"%.64s\"", argv[optind]);
		return -1;
	}
	return validate_options(opt, err, errlen);
}
