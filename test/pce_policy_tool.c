/*
 * pce_policy_tool.c
 *		Test tool around loader/policy.c, for the cache_ext lab test.
 *
 *   pce_policy_tool has-cache-ext
 *   pce_policy_tool attach PIN_DIR CGROUP_DIR
 *   pce_policy_tool detach PIN_DIR
 *   pce_policy_tool resume PIN_DIR      (what any loader run does first)
 *   pce_policy_tool hold PIN_DIR SECONDS (hold the struct_ops map: a slow teardown)
 *   pce_policy_tool knobs PIN_DIR TRACKING PROMOTE SCAN_MIN_PERCENT
 *   pce_policy_tool stats PIN_DIR
 *   pce_policy_tool mark|unmark PIN_DIR PID
 */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pg_cache_ext.h"
#include "policy.h"
#include "pins.h"

/* PIN_DIR as the loader holds it: <bpffs_dir>/<cluster id>, by fd, group postgres if it exists. */
static int
open_pins(const char *pin_dir, struct pce_pins *pins, char *why, size_t whylen)
{
	char		root[4096];
	char	   *slash;
	struct group *gr = getgrnam("postgres");

	snprintf(root, sizeof(root), "%s", pin_dir);
	slash = strrchr(root, '/');
	if (!slash || slash == root)
	{
		snprintf(why, whylen, "PIN_DIR must be <bpffs_dir>/<cluster id>");
		return -1;
	}
	*slash = '\0';
	return pce_pins_open(root, slash + 1, PCE_PINS_INSTALL, gr ? gr->gr_gid : 0, NULL, pins, why, whylen);
}

static const char *const stat_names[PCE_STAT__COUNT] = PCE_STAT_NAMES;

static int
open_pin(const char *dir, const char *name)
{
	char		path[4096];
	int			fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		perror(path);
	return fd;
}

int
main(int argc, char **argv)
{
	char		why[512] = "";
	int			rc;

	if (argc >= 2 && strcmp(argv[1], "has-cache-ext") == 0)
	{
		bool		has = pce_kernel_btf_has_cache_ext_ops(why, sizeof(why));

		printf("%s: %s\n", has ? "yes" : "no", why);
		return has ? 0 : 1;
	}
	if (argc == 4 && strcmp(argv[1], "attach") == 0)
	{
		struct pce_pins pins;
		char		name[4096];
		int			cg = pce_open_cgroup(argv[3], name, sizeof(name), why, sizeof(why));

		rc = cg < 0 ? cg : open_pins(argv[2], &pins, why, sizeof(why));
		if (rc == 0)
			rc = pce_attach_policy(&pins, cg, name, 0, why, sizeof(why));	/* no cluster: I/O-worker rule off */
		printf("attach: %d: %s\n", rc, why);
		return rc ? 1 : 0;
	}
	if (argc == 3 && strcmp(argv[1], "detach") == 0)
	{
		struct pce_pins pins;

		rc = open_pins(argv[2], &pins, why, sizeof(why));
		if (rc == 0)
			rc = pce_detach_policy(&pins, why, sizeof(why));
		printf("detach: %d: %s\n", rc, why);
		return rc ? 1 : 0;
	}
	if (argc == 3 && strcmp(argv[1], "resume") == 0)
	{
		struct pce_pins pins;

		rc = open_pins(argv[2], &pins, why, sizeof(why));
		if (rc == 0)
			rc = pce_policy_resume_interrupted(&pins, why, sizeof(why));
		printf("resume: %d: %s\n", rc, why);
		return rc ? 1 : 0;
	}
	if (argc == 4 && strcmp(argv[1], "hold") == 0)
	{
		/* keep the struct_ops map referenced, as a slow kernel teardown would */
		int			fd = open_pin(argv[2], PCE_PIN_POLICY_MAP);

		if (fd < 0)
			return 1;
		sleep(atoi(argv[3]));
		return 0;
	}
	if (argc == 6 && strcmp(argv[1], "knobs") == 0)
	{
		struct pce_knobs k = {.abi_version = PCE_ABI_VERSION};
		__u32		zero = 0;
		int			fd = open_pin(argv[2], PCE_PIN_KNOBS);

		k.tracking = atoi(argv[3]);
		k.promote_on_access = atoi(argv[4]);
		k.scan_min_percent = atoi(argv[5]);
		if (fd < 0 || bpf_map_update_elem(fd, &zero, &k, BPF_ANY) != 0)
		{
			perror("knobs");
			return 1;
		}
		return 0;
	}
	if (argc == 4 && (strcmp(argv[1], "mark") == 0 || strcmp(argv[1], "unmark") == 0))
	{
		struct pce_scan_mark mark = {.reason = PCE_REASON_TEST};
		__u32		pid = atoi(argv[3]);
		int			fd = open_pin(argv[2], PCE_PIN_SCAN_PIDS);

		if (fd < 0)
			return 1;
		rc = argv[1][0] == 'm' ? bpf_map_update_elem(fd, &pid, &mark, BPF_ANY)
			: bpf_map_delete_elem(fd, &pid);
		if (rc != 0)
			perror(argv[1]);
		return rc ? 1 : 0;
	}
	if (argc == 3 && strcmp(argv[1], "stats") == 0)
	{
		int			fd = open_pin(argv[2], PCE_PIN_STATS);
		int			ncpu = libbpf_num_possible_cpus();
		__u64	   *vals = calloc(ncpu, sizeof(__u64));

		if (fd < 0 || !vals)
			return 1;
		for (__u32 i = 0; i < PCE_STAT__COUNT && i < sizeof(stat_names) / sizeof(stat_names[0]); i++)
		{
			__u64		sum = 0;

			if (bpf_map_lookup_elem(fd, &i, vals) == 0)
				for (int c = 0; c < ncpu; c++)
					sum += vals[c];
			if (stat_names[i])
				printf("%s %llu\n", stat_names[i], (unsigned long long) sum);
		}
		return 0;
	}
	fprintf(stderr, "usage: pce_policy_tool has-cache-ext | attach PIN_DIR CGROUP | detach|resume PIN_DIR |"
			" knobs PIN_DIR TRACKING PROMOTE SCAN_MIN_PERCENT | stats PIN_DIR | mark|unmark PIN_DIR PID\n");
	return 2;
}
