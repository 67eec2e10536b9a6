/*
 * check_policy_object.c
 *		Open bpf/policy.bpf.o with libbpf (no load: this runs on any kernel)
 *		and check that the struct_ops map and every callback program are
 *		there, with the right program types and section names.  TAP output.
 *
 *   check_policy_object [PATH/TO/policy.bpf.o]
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>

static int	ntest;
static int	nfail;

static void
ok(int cond, const char *fmt, ...)
{
	va_list		ap;

	printf("%sok %d - ", cond ? "" : "not ", ++ntest);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond)
		nfail++;
}

static int
quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_WARN)
		return vfprintf(stderr, fmt, ap);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "bpf/policy.bpf.o";
	static const char *progs[] = {
		"pce_init", "pce_evict_folios", "pce_folio_added",
		"pce_folio_accessed", "pce_folio_evicted",
	};
	static const char *shared_maps[] = {"scan_pids", "stats", "knobs", "io_workers", "scan_owners"};
	struct bpf_object *obj;
	struct bpf_map *ops;

	libbpf_set_print(quiet);
	obj = bpf_object__open_file(path, NULL);
	ok(obj != NULL, "bpf_object__open_file(%s)", path);
	if (!obj)
	{
		printf("1..%d\n", ntest);
		return 1;
	}

	ops = bpf_object__find_map_by_name(obj, "pce_policy_ops");
	ok(ops != NULL, "struct_ops map pce_policy_ops present");
	ok(ops && bpf_map__type(ops) == BPF_MAP_TYPE_STRUCT_OPS, "pce_policy_ops is BPF_MAP_TYPE_STRUCT_OPS");

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
	{
		struct bpf_program *p = bpf_object__find_program_by_name(obj, progs[i]);

		ok(p != NULL, "program %s present", progs[i]);
		ok(p && bpf_program__type(p) == BPF_PROG_TYPE_STRUCT_OPS,
		   "program %s is BPF_PROG_TYPE_STRUCT_OPS", progs[i]);
		ok(p && strncmp(bpf_program__section_name(p), "struct_ops/", 11) == 0,
		   "program %s in a struct_ops/ section (%s)", progs[i], p ? bpf_program__section_name(p) : "-");
	}

	for (size_t i = 0; i < sizeof(shared_maps) / sizeof(shared_maps[0]); i++)
	{
		struct bpf_map *m = bpf_object__find_map_by_name(obj, shared_maps[i]);

		ok(m != NULL, "shared map %s present", shared_maps[i]);
		/* LIBBPF_PIN_BY_NAME without pin_root_path gives the default /sys/fs/bpf/<name> */
		ok(m && bpf_map__pin_path(m) != NULL, "shared map %s is pinned by name", shared_maps[i]);
	}
	ok(bpf_object__find_map_by_name(obj, "folio_lists") != NULL, "per-folio map folio_lists present");
	/* the research kernel's read bypass is unsafe (leaks, stale data): not used */
	ok(bpf_object__find_program_by_name(obj, "pce_admit_folio") == NULL,
	   "no admit_folio program (the kernel's read bypass is not used)");

	bpf_object__close(obj);
	printf("1..%d\n", ntest);
	return nfail ? 1 : 0;
}
